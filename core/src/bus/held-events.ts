// Events a plugin published that the configuration does not allow yet (a group its
// section does not map, a group whose policy does not list it), kept so that they are
// handled once a change to carapace.json allows them, instead of dropped in silence
// (issue 32). Bounded per plugin, newest kept: `MAX_PER_PLUGIN` events and
// `MAX_BYTES_PER_PLUGIN` of them; what falls out is given back to be dropped with a
// notice. In a small SQLite file, so that a restarted core still has them (in memory
// without a file); one event per plugin and key, so a plugin that publishes it again
// after a crash is not held twice. Not for ever: the person may discard a plugin's held
// events (the Overview), and those kept past MAX_HELD_DAYS go by themselves.
import type Database from 'better-sqlite3';
import type { PublishedEvent } from '../plugins/host-protocol.js';
import { openSqliteFile, STAMP_VERSION, type StoreProblem } from '../state/sqlite-file.js';

export const MAX_PER_PLUGIN = 100;
export const MAX_BYTES_PER_PLUGIN = 4 * 1024 * 1024;
/** A message nobody allowed in a month is not handled any more (it would answer something long past). */
export const MAX_HELD_DAYS = 30;

const SCHEMA = `CREATE TABLE IF NOT EXISTS held (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  plugin TEXT NOT NULL,
  name TEXT NOT NULL,
  topic TEXT NOT NULL,
  event TEXT NOT NULL,
  reason TEXT NOT NULL,
  at TEXT NOT NULL,
  UNIQUE (plugin, name)
);`;

export interface HeldEvent {
  seq: number;
  plugin: string;
  /** The plugin's key for it, or the host's id: the same event is held once. */
  name: string;
  topic: string;
  event: PublishedEvent;
  /** Why it was not taken when it came. */
  reason: string;
  at: string;
}

interface Row {
  seq: number;
  plugin: string;
  name: string;
  topic: string;
  event: string;
  reason: string;
  at: string;
}

export class HeldEvents {
  private readonly db: Database.Database;

  constructor(file: string | null, onProblem: (problem: StoreProblem) => void = () => undefined) {
    this.db = openSqliteFile(file, SCHEMA, onProblem, [STAMP_VERSION]);
  }

  /** Keeps `event`; returns what fell out to stay within the bounds (oldest first), to be dropped with a notice. */
  hold(plugin: string, name: string, topic: string, event: PublishedEvent, reason: string): HeldEvent[] {
    return this.db.transaction(() => {
      this.db.prepare('INSERT OR IGNORE INTO held (plugin, name, topic, event, reason, at) VALUES (?, ?, ?, ?, ?, ?)').run(plugin, name, topic, JSON.stringify(event), reason, new Date().toISOString());
      const rows = this.db.prepare('SELECT seq, length(event) AS bytes FROM held WHERE plugin = ? ORDER BY seq DESC').all(plugin) as { seq: number; bytes: number }[];
      let bytes = 0;
      const over = rows.filter((row, i) => (bytes += row.bytes) > MAX_BYTES_PER_PLUGIN || i >= MAX_PER_PLUGIN).map((row) => row.seq);
      const given: HeldEvent[] = over.map((seq) => this.take(seq)).filter((e): e is HeldEvent => e !== null);
      return given.reverse();
    })();
  }

  /** Every held event, oldest first. */
  all(): HeldEvent[] {
    return (this.db.prepare('SELECT * FROM held ORDER BY seq').all() as Row[]).map(parse);
  }

  /** How many each plugin has held, and the latest reason. */
  byPlugin(): Map<string, { count: number; reason: string }> {
    const rows = this.db.prepare('SELECT plugin, COUNT(*) AS count, (SELECT reason FROM held h2 WHERE h2.plugin = held.plugin ORDER BY seq DESC LIMIT 1) AS reason FROM held GROUP BY plugin').all() as { plugin: string; count: number; reason: string }[];
    return new Map(rows.map((r) => [r.plugin, { count: r.count, reason: r.reason }]));
  }

  /** Removes and returns every held event of `plugin`, or every one kept before `before` (ISO 8601), oldest first. */
  takeAll(which: { plugin: string } | { before: string }): HeldEvent[] {
    const rows = ('plugin' in which
      ? this.db.prepare('SELECT * FROM held WHERE plugin = ? ORDER BY seq').all(which.plugin)
      : this.db.prepare('SELECT * FROM held WHERE at < ? ORDER BY seq').all(which.before)) as Row[];
    const remove = this.db.prepare('DELETE FROM held WHERE seq = ?');
    this.db.transaction(() => rows.forEach((row) => remove.run(row.seq)))();
    return rows.map(parse);
  }

  /** Removes and returns one held event (it is being handled or dropped). */
  take(seq: number): HeldEvent | null {
    const row = this.db.prepare('SELECT * FROM held WHERE seq = ?').get(seq) as Row | undefined;
    if (!row) return null;
    this.db.prepare('DELETE FROM held WHERE seq = ?').run(seq);
    return parse(row);
  }

  close(): void {
    this.db.close();
  }
}

function parse(row: Row): HeldEvent {
  return { seq: row.seq, plugin: row.plugin, name: row.name, topic: row.topic, event: JSON.parse(row.event) as PublishedEvent, reason: row.reason, at: row.at };
}
