// The next getUpdates offset, kept in the plugin's data directory so that a restart
// neither replays confirmed updates nor skips unconfirmed ones. Written atomically.
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readVersionedJson, versionedJsonText } from '#sdk';

const FILE = 'offset.json';

/** The saved offset; throws on anything else (the file is then moved aside). */
function parseOffset(json: unknown): number {
  const value = (json as { offset?: unknown } | null)?.offset;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  throw new Error('no offset');
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
    const saved = readVersionedJson(this.file, { migrations: [(json) => json], read: parseOffset });
    if (saved.kind === 'missing') return 0;
    if (saved.kind === 'moved') return { movedAside: saved.movedAside };
    this.saved = saved.value;
    return saved.value;
  }

  /** Serialized; a write of an unchanged offset is skipped. */
  save(offset: number): Promise<void> {
    this.writing = this.writing.catch(() => undefined).then(async () => {
      if (offset === this.saved) return;
      const temp = `${this.file}.${process.pid}.tmp`;
      await writeFile(temp, versionedJsonText(1, { offset }), { mode: 0o600 });
      await rename(temp, this.file);
      this.saved = offset;
    });
    return this.writing;
  }
}
