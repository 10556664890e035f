// The names of the most recent events the core accepted, oldest forgotten first: enough to
// recognise an event the plugin host sends again (its receipt was lost when the host, the
// plugin or the core died), bounded whatever a plugin sends. Kept in a small SQLite file
// too, so that a core restarted after accepting an event still knows it (with no file:
// memory only).
import type Database from 'better-sqlite3';
import { openSqliteFile, STAMP_VERSION, type StoreProblem } from '../state/sqlite-file.js';

const SCHEMA = 'CREATE TABLE IF NOT EXISTS seen (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE);';

export class SeenKeys {
  private readonly keys = new Set<string>();
  private readonly db: Database.Database | null;
  /** The key written and the file trimmed to the newest `capacity`, in one commit. */
  private readonly write: ((key: string) => void) | null = null;

  /** `onWriteError`: a key not written (a full disk) is still remembered until the core restarts. */
  constructor(
    private readonly capacity: number,
    file: string | null = null,
    onProblem: (problem: StoreProblem) => void = () => undefined,
    private readonly onWriteError: (err: Error) => void = () => undefined,
  ) {
    this.db = file === null ? null : openSqliteFile(file, SCHEMA, onProblem, [STAMP_VERSION]);
    if (!this.db) return;
    const newest = this.db.prepare('SELECT key FROM seen ORDER BY seq DESC LIMIT ?').pluck().all(capacity) as string[];
    for (const key of newest.reverse()) this.keys.add(key);
    const insert = this.db.prepare('INSERT OR IGNORE INTO seen (key) VALUES (?)');
    const trim = this.db.prepare('DELETE FROM seen WHERE seq <= (SELECT MAX(seq) FROM seen) - ?');
    this.write = this.db.transaction((key: string) => {
      insert.run(key);
      trim.run(capacity);
    });
  }

  has(key: string): boolean {
    return this.keys.has(key);
  }

  add(key: string): void {
    if (this.keys.has(key)) return;
    this.keys.add(key);
    if (this.keys.size > this.capacity) this.keys.delete(this.keys.values().next().value as string);
    try {
      this.write?.(key);
    } catch (err) {
      this.onWriteError(err as Error);
    }
  }

  close(): void {
    this.db?.close();
  }
}
