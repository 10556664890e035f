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

function open(file: string | null, schema: string): Database.Database {
  const db = new Database(file ?? ':memory:');
  try {
    // A corrupt or foreign file fails here, not at the first write.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const [check] = db.pragma('quick_check') as Array<{ quick_check: string }>;
    if (check?.quick_check !== 'ok') throw new Error(`quick_check: ${check?.quick_check ?? 'no answer'}`);
    db.exec(schema);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Throws only if even a fresh file cannot be created (e.g. the directory is read-only). */
export function openSqliteFile(file: string | null, schema: string, onProblem: (problem: StoreProblem) => void): Database.Database {
  if (file) mkdirSync(dirname(file), { recursive: true });
  try {
    return open(file, schema);
  } catch (err) {
    if (!file || !existsSync(file)) throw err;
    const movedTo = asideName(file);
    renameSync(file, movedTo);
    for (const suffix of ['-wal', '-shm']) if (existsSync(file + suffix)) renameSync(file + suffix, movedTo + suffix);
    onProblem({ file, movedTo, error: (err as Error).message });
    return open(file, schema);
  }
}
