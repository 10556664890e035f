// The core's own small SQLite files (LLM usage, unfinished turns, ...): each with a format
// version (user_version), migrated once. WAL, synchronous=NORMAL
// (survives a killed core, not a power cut, which costs at most the last moments), checked
// on open. A file that cannot be opened as such a database is moved aside, loudly, and a
// fresh one started: a core that will not start is worse than a lost count. With no file
// (tests) the database lives in memory.
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname } from 'node:path';
import { asideName, StoreTooNewError } from './json-state.js';
import { reportMigration } from './format-migrations.js';

export { StoreTooNewError };

export interface StoreProblem {
  file: string;
  movedTo: string;
  error: string;
}

/** SQL, or a step that looks at the file first (a column an older version may lack). */
export type Migration = string | ((db: Database.Database) => void);

/**
 * `migrations[i]` takes the file from format version i (PRAGMA user_version) to i + 1, in
 * one transaction with the version bump; a fresh file is made by `schema` and then migrated.
 * An existing file that was migrated is reported (format-migrations.ts: Activity says so).
 */
function open(file: string | null, schema: string, migrations: readonly Migration[]): Database.Database {
  const db = new Database(file ?? ':memory:');
  try {
    // A corrupt or foreign file fails here, not at the first write.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const [check] = db.pragma('quick_check') as Array<{ quick_check: string }>;
    if (check?.quick_check !== 'ok') throw new Error(`quick_check: ${check?.quick_check ?? 'no answer'}`);
    const found = db.pragma('user_version', { simple: true }) as number;
    if (found > migrations.length) throw new StoreTooNewError(file, found, migrations.length);
    const fresh = found === 0 && (db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n === 0;
    db.exec(schema);
    for (let version = found; version < migrations.length; version++) {
      db.transaction(() => {
        const step = migrations[version]!;
        if (typeof step === 'string') db.exec(step);
        else step(db);
        db.pragma(`user_version = ${version + 1}`);
      }).immediate();
    }
    if (file && !fresh && found < migrations.length) reportMigration({ file, from: found, to: migrations.length });
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** For a migration: the column, unless a file of that version may already have it. */
export function addColumnIfMissing(db: Database.Database, table: string, column: string, definition: string): boolean {
  if ((db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).some((c) => c.name === column)) return false;
  db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
  return true;
}

/** A first format version for a file whose shape did not change: stamped, so that a newer one is refused. */
export const STAMP_VERSION: Migration = '';

/** Throws only if even a fresh file cannot be created (e.g. the directory is read-only), or the file is newer than this code. */
export function openSqliteFile(file: string | null, schema: string, onProblem: (problem: StoreProblem) => void, migrations: readonly Migration[] = []): Database.Database {
  if (file) mkdirSync(dirname(file), { recursive: true });
  try {
    return open(file, schema, migrations);
  } catch (err) {
    if (!file || !existsSync(file) || err instanceof StoreTooNewError) throw err;
    const movedTo = asideName(file);
    renameSync(file, movedTo);
    for (const suffix of ['-wal', '-shm']) if (existsSync(file + suffix)) renameSync(file + suffix, movedTo + suffix);
    onProblem({ file, movedTo, error: (err as Error).message });
    return open(file, schema, migrations);
  }
}
