// The next getUpdates offset, kept in the plugin's data directory so that a restart
// neither replays confirmed updates nor skips unconfirmed ones. Written atomically.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const FILE = 'offset.json';

function parseOffset(text: string): number | null {
  try {
    const value = (JSON.parse(text) as { offset?: unknown } | null)?.offset;
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
  } catch {
    return null;
  }
}

export class OffsetStore {
  private readonly file: string;
  private writing: Promise<void> = Promise.resolve();
  private saved = -1;

  constructor(dir: string) {
    this.file = join(dir, FILE);
  }

  /**
   * The saved offset; 0 on a first run (no file). A corrupt file is moved aside (kept for
   * a person to look at) and its new name returned: the caller must not replay.
   */
  async load(): Promise<number | { movedAside: string }> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    const value = parseOffset(text);
    if (value !== null) {
      this.saved = value;
      return value;
    }
    const movedAside = `${this.file}.corrupt-${Date.now()}`;
    await rename(this.file, movedAside);
    return { movedAside };
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
