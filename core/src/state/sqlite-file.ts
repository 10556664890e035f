// The core's own small SQLite files (LLM usage, unfinished turns): WAL, synchronous=NORMAL
// (survives a killed core, not a power cut, which costs at most the last moments), checked
// on open. A file that cannot be opened as such a database is moved aside, loudly, and a
// fresh one started: a core that will not start is worse than a lost count. With no file
// (tests) the database lives in memory.
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname } from 'node:path';
import { asideName } from './json-state.js';

export interface StoreProblem {
  file: string;
  movedTo: string;
  error: string;
}

/** A file a newer Carapace wrote: refused whole, never moved aside nor half-read. */
export class StoreTooNewError extends Error {
  readonly code = 'STORE_TOO_NEW';
  constructor(file: string | null, found: number, known: number) {
    super(`${file ?? 'database'} has format version ${found}, newer than the ${known} this Carapace knows: run the newer version, or restore a backup`);
    this.name = 'StoreTooNewError';
  }
}

/**
 * `migrations[i]` takes the file from format version i (PRAGMA user_version) to i + 1, in
 * one transaction with the version bump; a fresh file is made by `schema` and then migrated.
 */
function open(file: string | null, schema: string, migrations: readonly string[]): Database.Database {
  const db = new Database(file ?? ':memory:');
  try {
    // A corrupt or foreign file fails here, not at the first write.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const [check] = db.pragma('quick_check') as Array<{ quick_check: string }>;
    if (check?.quick_check !== 'ok') throw new Error(`quick_check: ${check?.quick_check ?? 'no answer'}`);
    const found = db.pragma('user_version', { simple: true }) as number;
    if (found > migrations.length) throw new StoreTooNewError(file, found, migrations.length);
    db.exec(schema);
    for (let version = found; version < migrations.length; version++) {
      db.transaction(() => {
        db.exec(migrations[version]);
        db.pragma(`user_version = ${version + 1}`);
      }).immediate();
    }
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Throws only if even a fresh file cannot be created (e.g. the directory is read-only), or the file is newer than this code. */
export function openSqliteFile(file: string | null, schema: string, onProblem: (problem: StoreProblem) => void, migrations: readonly string[] = []): Database.Database {
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
