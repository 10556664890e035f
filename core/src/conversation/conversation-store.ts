// Each group's conversation as the person saw it, in a small SQLite file in the data
// volume (state/sqlite-file.ts: a broken file is moved aside and a fresh one started).
// Written only by the core: a person's message the core accepted from a channel plugin,
// and a reply a channel's send tool reported delivered. Nothing an agent writes anywhere
// else ever lands here. Bounded per group by count, bytes and age, pruned on each write.
import type Database from 'better-sqlite3';
import type { ConversationSettings } from '../config.js';
import { openSqliteFile, type StoreProblem } from '../state/sqlite-file.js';

export type { StoreProblem };

/** `in`: a message to the group; `out`: a reply that reached its recipient. */
export type Direction = 'in' | 'out';

/**
 * Where the text came from (DESIGN 16): `person`, the person's own message or a reply of a
 * session that had read nothing external; `external`, text from outside (a mail someone
 * sent); `derived`, a reply written by a session that had read external content.
 */
export type Origin = 'person' | 'external' | 'derived';

export interface ConversationMessage {
  id: number;
  group: string;
  direction: Direction;
  /** The channel plugin's channel (telegram, webchat). */
  channel: string;
  /** `in`: the sender the channel named; `out`: the recipient the reply went to. */
  party: string;
  text: string;
  origin: Origin;
  /** Unix ms. */
  at: number;
}

export interface NewMessage {
  group: string;
  direction: Direction;
  channel: string;
  party: string;
  text: string;
  origin: Origin;
  /** The accepted event's id (`in`): a new session's brief stops before its own message. */
  event?: string;
  at?: number;
}

/** One message's text is kept up to this many characters (a send tool takes 32,768). */
export const MAX_TEXT_CHARS = 16_384;
const MAX_LABEL_CHARS = 64;
const DAY_MS = 86_400_000;

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    grp TEXT NOT NULL, at INTEGER NOT NULL, direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    channel TEXT NOT NULL, party TEXT NOT NULL, text TEXT NOT NULL, bytes INTEGER NOT NULL, event TEXT
  );
  CREATE INDEX IF NOT EXISTS messages_by_group ON messages (grp, id);
  CREATE INDEX IF NOT EXISTS messages_by_event ON messages (event);`;

/**
 * Version 1 labels each message with its origin. Older files knew no labels: a kept mail
 * (the email channel) becomes external; a reply cannot be told apart and stays as it was.
 */
const MIGRATIONS: readonly string[] = [
  `ALTER TABLE messages ADD COLUMN origin TEXT NOT NULL DEFAULT 'person' CHECK (origin IN ('person', 'external', 'derived'));
   UPDATE messages SET origin = 'external' WHERE direction = 'in' AND channel = 'email';`,
  // Version 2 remembers since when messages are kept (the oldest kept, or now): an upgraded
  // installation's chats hold earlier ones that were never kept here, and the console says so.
  `CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
   INSERT INTO meta (key, value) VALUES ('kept_since', COALESCE((SELECT MIN(at) FROM messages), CAST(unixepoch('subsec') * 1000 AS INTEGER)));`,
];

const COLUMNS = 'id, grp AS "group", direction, channel, party, text, origin, at';

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters not kept)`);

export class ConversationStore {
  private readonly db: Database.Database;
  private readonly insertStmt: Database.Statement;
  private readonly byCountStmt: Database.Statement;
  private readonly byBytesStmt: Database.Statement;
  private readonly byAgeStmt: Database.Statement;
  private readonly listStmt: Database.Statement;
  private readonly beforeStmt: Database.Statement;
  private readonly eventStmt: Database.Statement;
  private readonly clearStmt: Database.Statement;

  /**
   * `file` null: in memory (tests). `onProblem` hears about a file moved aside (the caller
   * logs and audits it). Throws only if even a fresh file cannot be created.
   */
  constructor(file: string | null, private readonly settings: ConversationSettings, onProblem: (problem: StoreProblem) => void = () => undefined) {
    const db = openSqliteFile(file, SCHEMA, onProblem, MIGRATIONS);
    this.db = db;
    this.insertStmt = db.prepare('INSERT INTO messages (grp, at, direction, channel, party, text, bytes, event, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    this.byCountStmt = db.prepare('DELETE FROM messages WHERE grp = ? AND id <= (SELECT id FROM messages WHERE grp = ? ORDER BY id DESC LIMIT 1 OFFSET ?)');
    // Newest first, a running total of bytes: what lies past the bound goes.
    this.byBytesStmt = db.prepare('DELETE FROM messages WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER (ORDER BY id DESC) AS total FROM messages WHERE grp = ?) WHERE total > ?)');
    this.byAgeStmt = db.prepare('DELETE FROM messages WHERE at < ?');
    this.listStmt = db.prepare(`SELECT ${COLUMNS} FROM (SELECT * FROM messages WHERE grp = ? AND at >= ? ORDER BY id DESC LIMIT ?) ORDER BY id`);
    this.beforeStmt = db.prepare(`SELECT ${COLUMNS} FROM (SELECT * FROM messages WHERE grp = ? AND at >= ? AND id < ? ORDER BY id DESC LIMIT ?) ORDER BY id`);
    this.eventStmt = db.prepare('SELECT id FROM messages WHERE grp = ? AND event = ?');
    this.clearStmt = db.prepare('DELETE FROM messages WHERE grp = ?');
  }

  /** Keeps a message (cut to MAX_TEXT_CHARS) and prunes the group to its bounds; null when keeping is off. */
  add(message: NewMessage): number | null {
    const { keep_messages, keep_kb } = this.settings;
    if (keep_messages === 0) return null;
    const text = cut(message.text, MAX_TEXT_CHARS);
    const at = message.at ?? Date.now();
    const id = this.db.transaction(() => {
      const row = this.insertStmt.run(message.group, at, message.direction, cut(message.channel, MAX_LABEL_CHARS), cut(message.party, MAX_LABEL_CHARS), text, Buffer.byteLength(text), message.event ?? null, message.origin);
      this.byCountStmt.run(message.group, message.group, keep_messages);
      this.byBytesStmt.run(message.group, keep_kb * 1024);
      this.byAgeStmt.run(this.oldest());
      return Number(row.lastInsertRowid);
    })();
    return id;
  }

  /** The group's latest `limit` messages (at most what is kept), oldest first. */
  list(group: string, limit = this.settings.keep_messages): ConversationMessage[] {
    return this.listStmt.all(group, this.oldest(), Math.max(0, limit)) as ConversationMessage[];
  }

  /**
   * The latest `limit` messages before the one the event `event` brought (all kept ones
   * when it is not here: a scheduled task, or a message cleared since), oldest first.
   */
  before(group: string, event: string | null, limit: number): ConversationMessage[] {
    const row = event === null ? undefined : (this.eventStmt.get(group, event) as { id: number } | undefined);
    return this.beforeStmt.all(group, this.oldest(), row?.id ?? Number.MAX_SAFE_INTEGER, Math.max(0, limit)) as ConversationMessage[];
  }

  /** Since when messages are kept (Unix ms): earlier ones were never kept here. */
  keptSince(): number {
    return (this.db.prepare("SELECT value FROM meta WHERE key = 'kept_since'").get() as { value: number }).value;
  }

  /** Forgets the group's conversation; how many messages went. */
  clear(group: string): number {
    return this.clearStmt.run(group).changes;
  }

  private oldest(): number {
    return Date.now() - this.settings.keep_days * DAY_MS;
  }

  close(): void {
    this.db.close();
  }
}
