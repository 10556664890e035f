// Model usage (tokens, cost in µUSD, requests) per group per UTC day, kept in a small SQLite file under the data dir so
// that budgets survive a core restart (state/sqlite-file.ts: a broken file is moved aside).
import type Database from 'better-sqlite3';
import { addColumnIfMissing, openSqliteFile, type Migration, type StoreProblem } from '../state/sqlite-file.js';

export interface DayUsage {
  group: string;
  day: string;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
  /** Tokens spent before usage was priced (an installation older than money budgets): their cost was never recorded, which is not $0. */
  unpriced_tokens: number;
  requests: number;
}

export type { StoreProblem };

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS usage (
    grp TEXT NOT NULL, day TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (grp, day)
  );
  CREATE TABLE IF NOT EXISTS notified (
    grp TEXT NOT NULL, window TEXT NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (grp, window, kind)
  );`;

/**
 * Version 1: files from before money budgets get `cost_micros`, and their tokens are kept
 * as `unpriced_tokens` (their cost was never recorded; the console says so, not "$0.00").
 */
const MIGRATIONS: readonly Migration[] = [
  (db) => {
    const priced = !addColumnIfMissing(db, 'usage', 'cost_micros', 'INTEGER NOT NULL DEFAULT 0');
    addColumnIfMissing(db, 'usage', 'unpriced_tokens', 'INTEGER NOT NULL DEFAULT 0');
    if (!priced) db.exec('UPDATE usage SET unpriced_tokens = input_tokens + output_tokens');
  },
];

const COLUMNS = 'grp AS "group", day, input_tokens, output_tokens, cost_micros, unpriced_tokens, requests';

export class UsageStore {
  private readonly db: Database.Database;
  private readonly addStmt: Database.Statement;
  private readonly countStmt: Database.Statement;
  private readonly getStmt: Database.Statement;
  private readonly dayStmt: Database.Statement;
  private readonly notifyStmt: Database.Statement;
  private readonly sinceStmt: Database.Statement;

  /**
   * `onProblem` hears about a file moved aside (the caller logs and audits it).
   * Throws only if even a fresh file cannot be created (e.g. the directory is read-only).
   */
  constructor(file: string | null, onProblem: (problem: StoreProblem) => void = () => undefined) {
    const db = openSqliteFile(file, SCHEMA, onProblem, MIGRATIONS);
    this.db = db;
    this.addStmt = db.prepare(
      `INSERT INTO usage (grp, day, input_tokens, output_tokens, cost_micros) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (grp, day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         cost_micros = cost_micros + excluded.cost_micros`,
    );
    this.countStmt = db.prepare(`INSERT INTO usage (grp, day, requests) VALUES (?, ?, 1) ON CONFLICT (grp, day) DO UPDATE SET requests = requests + 1`);
    this.getStmt = db.prepare(`SELECT ${COLUMNS} FROM usage WHERE grp = ? AND day = ?`);
    this.dayStmt = db.prepare(`SELECT ${COLUMNS} FROM usage WHERE day = ? ORDER BY grp`);
    this.sinceStmt = db.prepare(`SELECT ${COLUMNS} FROM usage WHERE day >= ? ORDER BY day DESC, grp`);
    this.notifyStmt = db.prepare('INSERT OR IGNORE INTO notified (grp, window, kind) VALUES (?, ?, ?)');
  }

  addUsage(group: string, day: string, spent: { input: number; output: number; micros: number }): void {
    this.addStmt.run(group, day, spent.input, spent.output, spent.micros);
  }

  countRequest(group: string, day: string): void {
    this.countStmt.run(group, day);
  }

  get(group: string, day: string): DayUsage {
    return (this.getStmt.get(group, day) as DayUsage | undefined) ?? { group, day, input_tokens: 0, output_tokens: 0, cost_micros: 0, unpriced_tokens: 0, requests: 0 };
  }

  day(day: string): DayUsage[] {
    return this.dayStmt.all(day) as DayUsage[];
  }

  /** Every group's usage from `day` (YYYY-MM-DD) on, newest day first. */
  since(day: string): DayUsage[] {
    return this.sinceStmt.all(day) as DayUsage[];
  }

  /** True the first time (group, window, kind) is seen: "tell the user once". */
  firstNotice(group: string, window: string, kind: string): boolean {
    return this.notifyStmt.run(group, window, kind).changes === 1;
  }

  close(): void {
    this.db.close();
  }
}
