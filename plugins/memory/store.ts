// One group's memory: a SQLite database (WAL, synchronous=FULL) with typed entries,
// supersession, full-text search and the brief. Synchronous by design (better-sqlite3):
// every call runs to completion on the event loop, so a check and the write it guards can
// never interleave with another request. What an entry is: entries.ts.
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { reportMigration } from '#sdk';
import { BEHAVIORAL, DAY_MS, ENTRY_TYPES, isoTimestamp, MAX_CONTENT, MAX_TAG_LENGTH, MAX_TAGS, MemoryInputError, normalizeTags, RANK_CANDIDATES, MAX_SEARCH_LIMIT, singleLine, type Brief, type BriefEntry, type BriefLimits, type EntryType, type NewEntry, type Provenance, type SearchOptions, type SearchResult, type StoredEntry } from './entries.js';
import { anyOf, queryTerms, tagPhrase } from './fts-query.js';
import { migrate, schemaVersion, SchemaTooNewError, SCHEMA_VERSION } from './schema.js';

interface Row {
  rowid: number;
  id: string;
  type: EntryType;
  content: string;
  tags: string;
  behavioral: number;
  superseded_by: string | null;
  session_id: string;
  group_name: string;
  created_at: string;
  correlation: string | null;
  external: number;
  rank?: number;
}

const COLUMNS = 'm.rowid AS rowid, m.id, m.type, m.content, m.tags, m.behavioral, m.superseded_by, m.session_id, m.group_name, m.created_at, m.correlation, m.external';
/** A new, current entry (store and storeMany). */
const INSERT_ENTRY = `INSERT INTO memory_entries (id, type, content, tags, behavioral, superseded_by, session_id, group_name, created_at, correlation, external)
  VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)`;

const provenanceOf = (row: Row): Provenance => ({ session_id: row.session_id, group: row.group_name, timestamp: row.created_at, correlation: row.correlation, external: row.external === 1 });
function parseTags(text: string): string[] {
  try {
    const value = JSON.parse(text) as unknown;
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string') : [];
  } catch {
    return [];
  }
}

function ageDays(createdAt: string, now: number): number {
  const ms = Date.parse(createdAt);
  return Number.isFinite(ms) ? Math.max(0, Math.floor((now - ms) / DAY_MS)) : 0;
}

export interface OpenOptions {
  /** Create the file if missing (mode 0600); otherwise a missing file is an error. */
  create: boolean;
}

export class MemoryDb {
  private readonly statements = new Map<string, Database.Statement>();
  /** The schema version the file had when opened (0 for a new file). */
  readonly foundVersion: number;

  /** At most this many matches are ranked by bm25 per search (see search). */
  rankCandidates = RANK_CANDIDATES;

  private constructor(
    readonly db: Database.Database,
    readonly group: string,
    foundVersion: number,
  ) {
    this.foundVersion = foundVersion;
  }

  /**
   * Opens (and migrates) one group's database. A file written by a newer schema is closed
   * untouched and reported with SchemaTooNewError.
   */
  static open(file: string, group: string, options: OpenOptions = { create: true }): MemoryDb {
    const db = new Database(file, { fileMustExist: !options.create });
    try {
      const version = schemaVersion(db);
      if (version > SCHEMA_VERSION) throw new SchemaTooNewError(version, SCHEMA_VERSION);
      db.pragma('busy_timeout = 5000');
      // WAL: the brief and searches read while a write commits. synchronous=FULL: every
      // acknowledged store is fsynced to the WAL before the agent hears "stored", so neither
      // a killed process nor a power cut loses it. Writes are rare (≤ 20 per session), so the
      // fsync is cheap; NORMAL would survive a killed process but not a power cut.
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      // superseded_by is a soft reference: a hard delete of a replacement must not fail, and
      // the entries it replaced stay superseded (kept for forensic review until purged).
      db.pragma('foreign_keys = OFF');
      const found = migrate(db);
      // An existing file brought up to date: Activity says so (a new one starts at version 0 too, empty).
      if (found > 0 && found < SCHEMA_VERSION) reportMigration({ file, from: found, to: SCHEMA_VERSION });
      return new MemoryDb(db, group, found);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  get version(): number {
    return schemaVersion(this.db);
  }

  get journalMode(): string {
    return String(this.db.pragma('journal_mode', { simple: true }));
  }

  close(): void {
    if (!this.db.open) return;
    try {
      this.db.pragma('optimize');
    } catch {
      // best effort
    }
    this.db.close();
  }

  private stmt(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  // ---- writes ------------------------------------------------------------------------------

  /** Stores an entry; with `supersedes`, marks that (current) entry as replaced, atomically. */
  store(entry: NewEntry): StoredEntry {
    const content = entry.content.trim();
    if (!content) throw new MemoryInputError('content is empty: store one short, self-contained statement.');
    if (content.length > MAX_CONTENT) throw new MemoryInputError(`content is longer than ${MAX_CONTENT} characters: store a shorter summary.`);
    if (!(ENTRY_TYPES as readonly string[]).includes(entry.type)) throw new MemoryInputError(`type must be one of ${ENTRY_TYPES.join(', ')}.`);
    const tags = normalizeTags(entry.tags);
    if (tags.length > MAX_TAGS) throw new MemoryInputError(`at most ${MAX_TAGS} tags per entry.`);
    if (tags.some((t) => t.length > MAX_TAG_LENGTH)) throw new MemoryInputError(`tags may be at most ${MAX_TAG_LENGTH} characters long.`);
    const id = `mem-${randomUUID()}`;
    const createdAt = isoTimestamp(entry.provenance.timestamp);
    const behavioral = BEHAVIORAL[entry.type];
    this.db
      .transaction(() => {
        if (entry.supersedes !== null) {
          const target = this.stmt('SELECT id, superseded_by FROM memory_entries WHERE id = ?').get(entry.supersedes) as
            | { id: string; superseded_by: string | null }
            | undefined;
          if (!target) throw new MemoryInputError(`supersedes: no memory entry "${entry.supersedes.slice(0, 100)}" exists in this group (find ids with memory_search). Nothing was stored.`);
          if (target.superseded_by !== null) {
            throw new MemoryInputError(`supersedes: entry "${entry.supersedes}" was already replaced by "${target.superseded_by}"; supersede that entry instead. Nothing was stored.`);
          }
        }
        this.stmt(INSERT_ENTRY).run(id, entry.type, content, JSON.stringify(tags), behavioral ? 1 : 0, entry.provenance.session_id, this.group, createdAt, entry.provenance.correlation, entry.provenance.external ? 1 : 0);
        if (entry.supersedes !== null) {
          this.stmt('UPDATE memory_entries SET superseded_by = ?, superseded_at = ? WHERE id = ? AND superseded_by IS NULL').run(id, createdAt, entry.supersedes);
        }
      })
      .immediate();
    return {
      id,
      type: entry.type,
      content,
      tags,
      behavioral,
      supersedes: entry.supersedes,
      provenance: { session_id: entry.provenance.session_id, group: this.group, timestamp: createdAt, correlation: entry.provenance.correlation, external: entry.provenance.external },
    };
  }

  /** Many entries in one transaction (bulk loading, benchmarks); no supersession. */
  storeMany(entries: readonly Omit<NewEntry, 'supersedes'>[]): number {
    const insert = this.stmt(INSERT_ENTRY);
    this.db
      .transaction(() => {
        for (const e of entries) {
          insert.run(`mem-${randomUUID()}`, e.type, e.content, JSON.stringify(normalizeTags(e.tags)), BEHAVIORAL[e.type] ? 1 : 0, e.provenance.session_id, this.group, isoTimestamp(e.provenance.timestamp), e.provenance.correlation, e.provenance.external ? 1 : 0);
        }
      })
      .immediate();
    return entries.length;
  }

  /** Hard delete. Entries this one had replaced stay superseded. False when there was none. */
  delete(id: string): boolean {
    return this.stmt('DELETE FROM memory_entries WHERE id = ?').run(id).changes > 0;
  }

  /** Deletes superseded entries replaced before `before` (ISO 8601); returns how many. */
  purgeSuperseded(before: string): number {
    return this.stmt('DELETE FROM memory_entries WHERE superseded_by IS NOT NULL AND superseded_at < ?').run(before).changes;
  }

  // ---- reads -------------------------------------------------------------------------------

  count(): number {
    return (this.stmt('SELECT count(*) AS n FROM memory_entries').get() as { n: number }).n;
  }

  get(id: string): (StoredEntry & { superseded_by: string | null }) | null {
    const row = this.stmt(`SELECT ${COLUMNS} FROM memory_entries m WHERE m.id = ?`).get(id) as Row | undefined;
    if (!row) return null;
    return {
      id: row.id,
      type: row.type,
      content: row.content,
      tags: parseTags(row.tags),
      behavioral: row.behavioral === 1,
      supersedes: (this.stmt('SELECT id FROM memory_entries WHERE superseded_by = ?').get(row.id) as { id: string } | undefined)?.id ?? null,
      superseded_by: row.superseded_by,
      provenance: provenanceOf(row),
    };
  }

  // Query plans are fixed (CROSS JOIN puts the FTS table outermost; INDEXED BY names the
  // index whose order the query reads in): sqlite_stat1 cannot express that almost every
  // entry has superseded_by NULL, and would lead the planner to sort the whole table.

  /**
   * Full-text search with bounded work. Every word of the query is a quoted literal, OR-ed;
   * bm25 ranks at most `rankCandidates` entries, newest first among the matches:
   * - if the query's words match at most that many entries in all, every match is ranked;
   * - otherwise the query keeps its rarest words (as many as fit the budget together) and
   *   drops the common ones, which say little about relevance anyway;
   * - a query of only very common words ranks its most recent matches.
   * Tags are pre-filtered through the FTS tags column and then checked exactly. Without
   * searchable words, the most recent entries (matching the filters) come back.
   */
  search(options: SearchOptions = {}): SearchResult[] {
    const limit = Math.min(MAX_SEARCH_LIMIT, Math.max(1, Math.floor(options.limit ?? 20)));
    const terms = queryTerms(options.query ?? '');
    const tags = normalizeTags(options.tags ?? []);
    const tagFilter = tags.map(tagPhrase).filter((p): p is string => p !== null).join(' AND ') || null;

    const where: string[] = [];
    const params: unknown[] = [];
    if (!options.includeSuperseded) where.push('m.superseded_by IS NULL');
    if (options.type) {
      where.push('m.type = ?');
      params.push(options.type);
    }
    for (const tag of tags) {
      where.push('EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ?)');
      params.push(tag);
    }
    const and = where.map((w) => ` AND ${w}`).join('');

    let rows: Row[];
    let ranked = false;
    if (terms.length > 0) {
      const text = this.selectTerms(terms, tagFilter);
      if (text === null) return [];
      const match = tagFilter ? `${text} AND ${tagFilter}` : text;
      // Candidates carry only what ranking needs; content is read for the final `limit` rows.
      rows = this.stmt(
        `SELECT ${COLUMNS}, t.rank AS rank FROM (
           SELECT rid, rank, created_at FROM (
             SELECT memory_fts.rowid AS rid, memory_fts.rank AS rank, m.created_at AS created_at
             FROM memory_fts CROSS JOIN memory_entries m ON m.rowid = memory_fts.rowid
             WHERE memory_fts MATCH ?${and} ORDER BY memory_fts.rowid DESC LIMIT ${this.rankCandidates})
           ORDER BY rank, created_at DESC, rid DESC LIMIT ?) t
         CROSS JOIN memory_entries m ON m.rowid = t.rid
         ORDER BY t.rank, t.created_at DESC, t.rid DESC`,
      ).all(match, ...params, limit) as Row[];
      ranked = true;
    } else if (tagFilter !== null) {
      rows = this.stmt(
        `SELECT ${COLUMNS} FROM memory_fts CROSS JOIN memory_entries m ON m.rowid = memory_fts.rowid
         WHERE memory_fts MATCH ?${and} ORDER BY memory_fts.rowid DESC LIMIT ?`,
      ).all(tagFilter, ...params, limit) as Row[];
    } else {
      const index = options.type ? 'idx_memory_type_created' : 'idx_memory_created';
      rows = this.stmt(`SELECT ${COLUMNS} FROM memory_entries m INDEXED BY ${index} WHERE 1${and} ORDER BY m.created_at DESC, m.rowid DESC LIMIT ?`).all(...params, limit) as Row[];
    }

    // bm25 is negative, lower is better; the best match of this search scores 1.
    const best = rows.reduce((min, r) => Math.min(min, r.rank ?? 0), 0);
    return rows.map((row) => {
      const score = !ranked || best === 0 ? 1 : Math.max(0.001, Math.round(((row.rank ?? 0) / best) * 1000) / 1000);
      const result: SearchResult = {
        id: row.id,
        type: row.type,
        content: row.content,
        behavioral: row.behavioral === 1,
        tags: parseTags(row.tags),
        created_at: row.created_at,
        relevance_score: score,
        provenance: provenanceOf(row),
      };
      if (options.includeSuperseded) result.superseded_by = row.superseded_by;
      return result;
    });
  }

  /** How many entries match (counting no further than `cap`). */
  private matches(expression: string, cap: number): number {
    return (this.stmt(`SELECT count(*) AS n FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ${cap})`).get(expression) as { n: number }).n;
  }

  /** The text part of the MATCH expression (see search); null when no word matches at all. */
  private selectTerms(terms: string[], tagFilter: string | null): string | null {
    const budget = this.rankCandidates;
    const within = (e: string): string => (tagFilter ? `${e} AND ${tagFilter}` : e);
    const all = anyOf(terms)!;
    if (terms.length === 1 || this.matches(within(all), budget + 1) <= budget) return all;
    const counted = terms.map((term) => ({ term, n: this.matches(within(anyOf([term])!), budget + 1) })).filter((t) => t.n > 0);
    if (counted.length === 0) return null;
    counted.sort((a, b) => a.n - b.n);
    const kept: string[] = [];
    let total = 0;
    for (const { term, n } of counted) {
      if (total + n > budget) break;
      kept.push(term);
      total += n;
    }
    return anyOf(kept.length > 0 ? kept : counted.map((t) => t.term));
  }

  /**
   * Current entries only: behavioral first, newest first within each, single-line content,
   * cut at whichever of maxEntries and maxChars (measured as rendered lines) comes first.
   */
  brief(limits: BriefLimits): Brief {
    const now = limits.now ?? Date.now();
    const maxEntries = Math.max(0, Math.floor(limits.maxEntries));
    const maxChars = Math.max(0, Math.floor(limits.maxChars));
    const read = this.db.transaction(() => {
      const total = this.count();
      const rows =
        maxEntries === 0
          ? []
          : (this.stmt(`SELECT ${COLUMNS} FROM memory_entries m INDEXED BY idx_memory_current WHERE m.superseded_by IS NULL ORDER BY m.behavioral DESC, m.created_at DESC, m.rowid DESC LIMIT ?`).all(
              maxEntries,
            ) as Row[]);
      return { total, rows };
    });
    const { total, rows } = read();
    const entries: BriefEntry[] = [];
    let chars = 0;
    for (const row of rows) {
      const content = singleLine(row.content);
      const age = ageDays(row.created_at, now);
      // As the brief renders it: "- [type] content (Nd ago)\n".
      const size = `- [${row.type}] ${content} (${age}d ago)\n`.length;
      if (chars + size > maxChars) break;
      chars += size;
      const entry: BriefEntry = { id: row.id, type: row.type, content, behavioral: row.behavioral === 1, tags: parseTags(row.tags), age_days: age, external: row.external === 1 };
      if (limits.includeProvenance) entry.provenance = { session_id: row.session_id, group: row.group_name, timestamp: row.created_at };
      entries.push(entry);
    }
    return { entries, generated_at: new Date(now).toISOString(), entry_count: total, brief_count: entries.length };
  }
}

export * from './entries.js';
