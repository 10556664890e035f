// The next getUpdates offset, kept in the plugin's data directory so that a restart
// neither replays confirmed updates nor skips unconfirmed ones. Written atomically.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const FILE = 'offset.json';

export class OffsetStore {
  private readonly file: string;
  private writing: Promise<void> = Promise.resolve();
  private saved = -1;

  constructor(dir: string) {
    this.file = join(dir, FILE);
  }

  async load(): Promise<number> {
    try {
      const value = (JSON.parse(await readFile(this.file, 'utf8')) as { offset?: unknown }).offset;
      if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) {
        this.saved = value;
        return value;
      }
    } catch {
      // Missing or unreadable: start from whatever Telegram still holds.
    }
    return 0;
  }

  /** Serialized; a write of an unchanged offset is skipped. */
  save(offset: number): Promise<void> {
    this.writing = this.writing.catch(() => undefined).then(async () => {
      if (offset === this.saved) return;
      const temp = `${this.file}.${process.pid}.tmp`;
      await writeFile(temp, JSON.stringify({ offset }), { mode: 0o600 });
      await rename(temp, this.file);
      this.saved = offset;
    });
    return this.writing;
  }
}
