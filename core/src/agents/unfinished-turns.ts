// Messages (and task runs) the core accepted for an agent and that no turn has finished
// yet, kept in a small SQLite file so that a core crash or stop cannot drop one silently.
// Rows left by an earlier run are the ones nobody answered: the person is told once that
// they were not handled (see notHandledNotice), and they are never run again, since the
// agent may already have acted on them before the core died.
import type Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import type { EventEnvelope } from '../protocol/envelope.js';
import { addColumnIfMissing, openSqliteFile, type Migration, type StoreProblem } from '../state/sqlite-file.js';
import { bound, escapeText } from '../text/escape.js';

/** Rows kept at most: a flood of inbound messages drops the oldest ones' notices, not the core's disk. */
export const MAX_UNFINISHED = 5000;
const PREVIEW_CHARS = 80;

export interface UnfinishedTurn {
  id: string;
  group: string;
  topic: string;
  source: string;
  preview: string;
  accepted_at: string;
  /** A reply of the turn reached the person before the core stopped: they must not read "not handled". */
  replied: boolean;
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS unfinished (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE, boot TEXT NOT NULL, grp TEXT NOT NULL, topic TEXT NOT NULL,
    source TEXT NOT NULL, preview TEXT NOT NULL, accepted_at TEXT NOT NULL,
    replied INTEGER NOT NULL DEFAULT 0
  );`;

/** Version 1: a file from before `replied` existed gets it; its rows read as not replied. */
const MIGRATIONS: readonly Migration[] = [(db) => void addColumnIfMissing(db, 'unfinished', 'replied', 'INTEGER NOT NULL DEFAULT 0')];

/** What the person reads: the start of the message (or the task's id). */
export function previewOf(event: EventEnvelope): string {
  const p = event.payload as Record<string, unknown>;
  const text = event.topic === 'task.triggered' ? `scheduled task ${typeof p.task_id === 'string' ? p.task_id : '(unnamed)'}` : typeof p.body === 'string' ? p.body : '';
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS - 1)}…` : flat;
}

/** A reply the agent tried in the turn that failed: the tool, its error code and message (scrubbed), and how many more failed before it. */
export interface FailedReply {
  tool: string;
  code: string;
  message: string;
  more?: number;
}

const FAILURE_CHARS = 300;

/** A turn on the person's message ended and none of its replies reached them: what failed, when a reply was tried. */
export function noAnswerNotice(preview: string, failed: FailedReply | null = null): string {
  if (!failed) return `The agent ended its turn on "${preview}" without an answer reaching you (it sent you none). Send it again if you still need it.`;
  // The tool's own words, as an agent got them: one line, hidden characters shown, bounded.
  const said = bound(escapeText(`${failed.code}: ${failed.message}`.replace(/\s+/g, ' ').trim()), FAILURE_CHARS);
  const more = failed.more ? ` (and ${failed.more} earlier ${failed.more === 1 ? 'try' : 'tries'} failed too)` : '';
  const next = failed.code === 'RESULT_UNKNOWN' ? 'It may have gone out all the same: check before you ask again.' : 'Send it again if you still need it.';
  return `The agent ended its turn on "${preview}" without an answer reaching you: its ${failed.tool} failed${more}: ${said}. ${next}`;
}

/** One notice per group for what an earlier run left unfinished; a turn whose reply went out is not called "not handled". */
export function notHandledNotice(turns: UnfinishedTurn[]): string {
  const list = (of: UnfinishedTurn[]): string[] => {
    const shown = of.slice(0, 5).map((t) => `• "${t.preview}" (${t.accepted_at.slice(0, 16).replace('T', ' ')} UTC)`);
    return of.length > shown.length ? [...shown, `and ${of.length - shown.length} more.`] : shown;
  };
  const unanswered = turns.filter((t) => !t.replied);
  const answered = turns.filter((t) => t.replied);
  const lines: string[] = [];
  if (unanswered.length > 0) {
    const one = unanswered.length === 1;
    lines.push(`Carapace restarted before it finished ${one ? 'this' : 'these'}, so ${one ? 'it was' : 'they were'} not handled and will not be run again:`, ...list(unanswered));
  }
  if (answered.length > 0) {
    const one = answered.length === 1;
    lines.push(`Carapace restarted while the agent was still working on ${one ? 'this' : 'these'}: you got ${one ? 'its reply' : 'their replies'}, but it may not have finished what came after, and will not run ${one ? 'it' : 'them'} again:`, ...list(answered));
  }
  lines.push(unanswered.length > 0 ? 'Send again what you still need (the agent may have done part of it before the restart).' : 'Check, and send again what is still missing.');
  return lines.join('\n');
}

export class UnfinishedTurns {
  /** This run: rows of other boots are what earlier runs left behind. */
  readonly boot = randomUUID();
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;
  private readonly remove: Database.Statement;
  private readonly markReplied: Database.Statement;
  private readonly trim: Database.Statement;
  private readonly leftovers: Database.Statement;
  private broken = false;

  /**
   * `onProblem` hears about a file moved aside; `onWriteError` about a write that failed
   * (a full disk): the message is still handled, only its crash notice is at risk.
   */
  constructor(
    file: string | null,
    onProblem: (problem: StoreProblem) => void = () => undefined,
    private readonly onWriteError: (err: Error) => void = () => undefined,
  ) {
    const db = openSqliteFile(file, SCHEMA, onProblem, MIGRATIONS);
    this.db = db;
    this.insert = db.prepare('INSERT OR IGNORE INTO unfinished (id, boot, grp, topic, source, preview, accepted_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
    this.remove = db.prepare('DELETE FROM unfinished WHERE id = ?');
    this.markReplied = db.prepare('UPDATE unfinished SET replied = 1 WHERE id = ?');
    this.trim = db.prepare('DELETE FROM unfinished WHERE seq <= (SELECT MAX(seq) FROM unfinished) - ?');
    this.leftovers = db.prepare('SELECT id, grp AS "group", topic, source, preview, accepted_at, replied FROM unfinished WHERE boot != ? ORDER BY seq');
  }

  /** The core took the event for an agent: until finish(), a crash leaves it here. */
  accept(event: EventEnvelope): void {
    if (event.group === null) return;
    this.write(() => {
      this.insert.run(event.id, this.boot, event.group, event.topic, event.source, previewOf(event), event.timestamp);
      this.trim.run(MAX_UNFINISHED);
    });
  }

  /** A reply of the event's turn reached the person: a crash now must not tell them it was not handled. */
  replied(id: string): void {
    this.write(() => this.markReplied.run(id));
  }

  /** A turn ended with a reply or a notice the person saw: nothing left to tell. */
  finish(id: string): void {
    this.write(() => this.remove.run(id));
  }

  /** What earlier runs left, removed as it is taken: a second restart does not tell again. */
  takeLeftovers(): UnfinishedTurn[] {
    try {
      return this.db.transaction(() => {
        const rows = (this.leftovers.all(this.boot) as (Omit<UnfinishedTurn, 'replied'> & { replied: number })[]).map((r) => ({ ...r, replied: r.replied === 1 }));
        for (const row of rows) this.remove.run(row.id);
        return rows;
      })();
    } catch (err) {
      this.onWriteError(err as Error);
      return [];
    }
  }

  close(): void {
    this.db.close();
  }

  private write(fn: () => void): void {
    try {
      fn();
      this.broken = false;
    } catch (err) {
      // Reported once per outage, not once per message.
      if (!this.broken) this.onWriteError(err as Error);
      this.broken = true;
    }
  }
}
