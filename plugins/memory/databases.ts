// One SQLite file per group in the plugin's storage directory: <dir>/<group>.sqlite.
// Databases are opened lazily and cached; a group that never stored anything gets no file.
import { closeSync, existsSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryDb } from './store.js';

/** The core's group-name rule, checked again here before a name becomes part of a path. */
export const GROUP_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const SUFFIX = '.sqlite';

export class InvalidGroupError extends Error {
  constructor() {
    super('invalid group name');
    this.name = 'InvalidGroupError';
  }
}

/** A group whose database file could not be read: that group's memory is off, the rest works. */
export class DamagedDatabaseError extends Error {
  constructor(
    readonly group: string,
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file} is damaged: ${reason}`);
    this.name = 'DamagedDatabaseError';
  }
}

/** SQLite's answers for a file that is not (or no longer) a sound database. */
export function isCorruption(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB');
}

export class MemoryDatabases {
  private readonly open = new Map<string, MemoryDb>();
  private readonly damaged = new Map<string, DamagedDatabaseError>();

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  fileOf(group: string): string {
    if (!GROUP_NAME.test(group)) throw new InvalidGroupError();
    return join(this.dir, `${group}${SUFFIX}`);
  }

  /** Groups that have a database file, by file name. */
  existingGroups(): string[] {
    return readdirSync(this.dir)
      .filter((name) => name.endsWith(SUFFIX))
      .map((name) => name.slice(0, -SUFFIX.length))
      .filter((group) => GROUP_NAME.test(group))
      .sort();
  }

  /**
   * The group's database; with `create: false`, null when the group has none yet (reads of
   * a group that never stored anything create no file).
   */
  get(group: string, create: boolean): MemoryDb | null {
    const cached = this.open.get(group);
    if (cached) return cached;
    const damage = this.damaged.get(group);
    if (damage) throw damage;
    const file = this.fileOf(group);
    if (!existsSync(file)) {
      if (!create) return null;
      // An empty file is an empty database; creating it first fixes its mode (and SQLite
      // gives the -wal and -shm files the same).
      closeSync(openSync(file, 'a', 0o600));
    }
    let db: MemoryDb;
    try {
      db = MemoryDb.open(file, group, { create: false });
    } catch (err) {
      throw isCorruption(err) ? this.markDamaged(group, (err as Error).message) : err;
    }
    this.open.set(group, db);
    return db;
  }

  /** From now on (until a restart finds it repaired) the group's memory is unavailable. */
  markDamaged(group: string, reason: string): DamagedDatabaseError {
    const damage = new DamagedDatabaseError(group, this.fileOf(group), reason);
    this.damaged.set(group, damage);
    this.open.get(group)?.close();
    this.open.delete(group);
    return damage;
  }

  closeAll(): void {
    for (const db of this.open.values()) db.close();
    this.open.clear();
  }
}
