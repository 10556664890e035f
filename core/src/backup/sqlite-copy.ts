// A live database copied with SQLite's online backup API, from a read-only connection, while
// its owner (the core, a plugin) keeps writing: the copy is the database as it was at one
// moment, never a mix. The copy is then checked (integrity_check) and its schema version read.
import Database from 'better-sqlite3';
import { closeSync, existsSync, openSync, readSync, rmSync } from 'node:fs';

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/** Whether a file starts like a SQLite database (its first 16 bytes). */
export function isSqliteFile(file: string): boolean {
  const head = Buffer.alloc(SQLITE_MAGIC.length);
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return false;
  }
  try {
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(SQLITE_MAGIC);
  } finally {
    closeSync(fd);
  }
}

/** The database itself is damaged (its owner reports it too): left out of the archive, said. */
export class DamagedDatabase extends Error {}

const isCorruption = (err: unknown): boolean => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB');
};

/** `integrity_check` of a database file, and its user_version; null when it passes, else what it found. */
export function checkDatabase(file: string): { problem: string | null; userVersion: number } {
  const db = new Database(file, { fileMustExist: true });
  try {
    const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
    const found = rows.map((r) => r.integrity_check);
    const userVersion = db.pragma('user_version', { simple: true }) as number;
    return { problem: found.length === 1 && found[0] === 'ok' ? null : found.slice(0, 3).join('; '), userVersion };
  } finally {
    db.close();
  }
}

/**
 * Copies `source` to `target` (which must not exist) and checks the copy. Throws
 * DamagedDatabase for a source SQLite calls corrupt, any other error as it is.
 */
export async function copyDatabase(source: string, target: string): Promise<{ userVersion: number }> {
  let db: Database.Database;
  try {
    db = new Database(source, { readonly: true, fileMustExist: true, timeout: 10_000 });
  } catch (err) {
    if (isCorruption(err)) throw new DamagedDatabase((err as Error).message);
    throw err;
  }
  try {
    // Every remaining page in one step: one read transaction, so a writer between two steps
    // cannot make the copy start over (SQLite restarts a backup whose source changed).
    await db.backup(target, { progress: () => 1 << 30 });
  } catch (err) {
    rmSync(target, { force: true });
    if (isCorruption(err)) throw new DamagedDatabase((err as Error).message);
    throw err;
  } finally {
    db.close();
  }
  let checked: { problem: string | null; userVersion: number };
  try {
    checked = checkDatabase(target);
  } catch (err) {
    checked = { problem: (err as Error).message, userVersion: 0 };
  }
  for (const suffix of ['-wal', '-shm', '-journal']) if (existsSync(target + suffix)) rmSync(target + suffix);
  if (checked.problem !== null) {
    rmSync(target, { force: true });
    throw new DamagedDatabase(`integrity_check: ${checked.problem}`);
  }
  return { userVersion: checked.userVersion };
}
