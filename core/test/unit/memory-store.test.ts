// The memory plugin's modules on real SQLite files: schema and migrations, entries,
// supersession, search (FTS5 quoting, filters, bounded ranking), the brief, purge, limits.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryDatabases } from '../../../plugins/memory/databases.js';
import { anyOf, ftsMatchExpression, queryTerms, quoteLiteral, tagPhrase } from '../../../plugins/memory/fts-query.js';
import { SessionLimits } from '../../../plugins/memory/limits.js';
import { migrate, SCHEMA_V1, SCHEMA_VERSION, SchemaTooNewError } from '../../../plugins/memory/schema.js';
import { MemoryDb, singleLine, type EntryType, type NewEntry } from '../../../plugins/memory/store.js';
import { parseSettings } from '../../../plugins/memory/handler.js';

let dir: string;
let db: MemoryDb;
let clock = Date.parse('2026-01-01T00:00:00Z');

function entry(type: EntryType, content: string, extra: Partial<NewEntry> = {}): NewEntry {
  clock += 60_000;
  return { type, content, tags: [], supersedes: null, provenance: { session_id: 'sess-1', group: 'main', timestamp: new Date(clock).toISOString(), correlation: 'corr-1', external: false }, ...extra };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cp-memory-'));
  db = MemoryDb.open(join(dir, 'main.sqlite'), 'main');
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('fts-query', () => {
  it('quotes every word as a string literal, so no user text is FTS5 syntax', () => {
    expect(quoteLiteral('a"b')).toBe('"a""b"');
    expect(ftsMatchExpression('NEAR(a b) AND "x" OR -y* col:z ^w')).toBe('("near" OR "a" OR "b" OR "and" OR "x" OR "or" OR "y" OR "col" OR "z" OR "w")');
    expect(ftsMatchExpression('" * - : ( ) {}')).toBeNull();
    expect(queryTerms('Dog dog DOG')).toEqual(['dog']);
    expect(queryTerms('x '.repeat(100) + Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ')).length).toBeLessThanOrEqual(32);
    expect(anyOf([])).toBeNull();
    expect(tagPhrase('New York')).toBe('tags : ("new" + "york")');
    expect(tagPhrase('!!!')).toBeNull();
  });
});

describe('schema', () => {
  it('creates the current schema in WAL mode with the FTS table and triggers', () => {
    expect(db.version).toBe(SCHEMA_VERSION);
    expect(db.journalMode).toBe('wal');
    expect(db.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    const names = (db.db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table','trigger','index')").all() as { name: string }[]).map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['memory_entries', 'memory_fts', 'memory_fts_insert', 'memory_fts_delete', 'memory_fts_update', 'idx_memory_type', 'idx_memory_behavioral', 'idx_memory_superseded', 'idx_memory_created', 'idx_memory_current']));
  });

  it('migrates a version 1 database forward, keeping its entries searchable', () => {
    const file = join(dir, 'old.sqlite');
    const raw = new Database(file);
    raw.exec(SCHEMA_V1);
    raw.pragma('user_version = 1');
    raw.prepare("INSERT INTO memory_entries VALUES ('mem-b', 'preference', 'Prefers coffee', '[\"drinks\"]', 1, NULL, 's0', 'old', '2025-02-01T10:00:00+01:00')").run();
    raw.prepare("INSERT INTO memory_entries VALUES ('mem-a', 'preference', 'Prefers tea', '[\"drinks\"]', 1, 'mem-b', 's0', 'old', '2025-01-01T10:00:00Z')").run();
    raw.close();
    const old = MemoryDb.open(file, 'old', { create: false });
    try {
      expect(old.foundVersion).toBe(1);
      expect(old.version).toBe(SCHEMA_VERSION);
      expect(old.search({ query: 'coffee' }).map((r) => r.id)).toEqual(['mem-b']);
      expect(old.search({ query: 'preferences' }).map((r) => r.id)).toEqual(['mem-b']); // stemming since v2
      const a = old.db.prepare("SELECT created_at, superseded_at FROM memory_entries WHERE id = 'mem-a'").get();
      expect(a).toEqual({ created_at: '2025-01-01T10:00:00.000Z', superseded_at: '2025-02-01T09:00:00.000Z' });
    } finally {
      old.close();
    }
  });

  it('refuses a database newer than the code, without touching it', () => {
    const file = join(dir, 'new.sqlite');
    const raw = new Database(file);
    raw.exec('CREATE TABLE future (x)');
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    expect(() => MemoryDb.open(file, 'new', { create: false })).toThrow(SchemaTooNewError);
    const check = new Database(file, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION + 1);
    expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    check.close();
    const again = new Database(file);
    expect(() => migrate(again)).toThrow(/newer/);
    again.close();
  });
});

describe('entries', () => {
  it('derives behavioral from the type and takes provenance as given', () => {
    const kinds: [EntryType, boolean][] = [['preference', true], ['fact', false], ['instruction', true], ['context', false], ['correction', true]];
    for (const [type, behavioral] of kinds) {
      const stored = db.store(entry(type, `a ${type}`, { tags: ['  Mixed Case ', 'mixed case', ''] }));
      expect(stored).toMatchObject({ type, behavioral, tags: ['mixed case'], supersedes: null, provenance: { session_id: 'sess-1', group: 'main', correlation: 'corr-1' } });
      expect(stored.id).toMatch(/^mem-[0-9a-f-]{36}$/);
    }
  });

  it('rejects empty content and unknown supersedes targets with messages for the agent', () => {
    expect(() => db.store(entry('fact', '  \n '))).toThrow(/content is empty/);
    expect(() => db.store(entry('fact', 'x', { supersedes: 'mem-nope' }))).toThrow(/no memory entry "mem-nope"/);
    expect(db.count()).toBe(0);
  });

  it('supersession hides the old entry from search and brief, and chains stay linear', () => {
    const old = db.store(entry('preference', 'Prefers tabs'));
    const replacement = db.store(entry('preference', 'Prefers spaces', { supersedes: old.id }));
    expect(replacement.supersedes).toBe(old.id);
    expect(db.search({ query: 'prefers' }).map((r) => r.id)).toEqual([replacement.id]);
    const all = db.search({ query: 'prefers', includeSuperseded: true });
    expect(all.find((r) => r.id === old.id)?.superseded_by).toBe(replacement.id);
    expect(db.brief({ maxEntries: 50, maxChars: 10_000 }).entries.map((e) => e.id)).toEqual([replacement.id]);
    expect(() => db.store(entry('preference', 'Prefers both', { supersedes: old.id }))).toThrow(new RegExp(`already replaced by "${replacement.id}"`));
    expect(db.get(replacement.id)?.supersedes).toBe(old.id);
  });

  it('hard-deletes; entries the deleted one replaced stay superseded', () => {
    const old = db.store(entry('fact', 'Lives in Paris'));
    const replacement = db.store(entry('fact', 'Lives in Lyon', { supersedes: old.id }));
    expect(db.delete(replacement.id)).toBe(true);
    expect(db.delete(replacement.id)).toBe(false);
    expect(db.search({ query: 'lives' })).toEqual([]);
    expect(db.search({ query: 'lyon', includeSuperseded: true })).toEqual([]);
    expect(db.search({ query: 'paris', includeSuperseded: true }).map((r) => r.id)).toEqual([old.id]);
  });

  it('purges only entries superseded before the cut-off', () => {
    const a = db.store(entry('fact', 'one'));
    db.store(entry('fact', 'two', { supersedes: a.id }));
    const c = db.store(entry('fact', 'three'));
    db.store(entry('fact', 'four', { supersedes: c.id }));
    db.db.prepare('UPDATE memory_entries SET superseded_at = ? WHERE id = ?').run('2020-01-01T00:00:00.000Z', a.id);
    expect(db.purgeSuperseded('2025-01-01T00:00:00.000Z')).toBe(1);
    expect(db.get(a.id)).toBeNull();
    expect(db.get(c.id)).not.toBeNull();
    expect(db.count()).toBe(3);
  });
});

describe('search', () => {
  beforeEach(() => {
    db.store(entry('preference', 'User prefers TypeScript over JavaScript', { tags: ['coding', 'typescript'] }));
    db.store(entry('fact', "User's dog is named Luna", { tags: ['pets'] }));
    db.store(entry('instruction', 'Always check the calendar before scheduling meetings', { tags: ['calendar', 'work'] }));
    db.store(entry('context', 'Working on the Carapace project in TypeScript', { tags: ['work', 'coding'] }));
  });

  it('never passes hostile text to FTS5 as syntax', () => {
    for (const q of ['"', 'NEAR(', 'NEAR(a b, 2)', 'AND OR NOT', '*', '-', ':', '"unbalanced', 'content:luna', '^luna', '(', ')', '{content}: x', 'luna" OR "x', '\u0000', '💥']) {
      expect(() => db.search({ query: q })).not.toThrow();
    }
    expect(db.search({ query: 'content:luna' }).map((r) => r.content)).toEqual(["User's dog is named Luna"]);
  });

  it('ranks by relevance (0–1, best = 1) and falls back to most recent without words', () => {
    const results = db.search({ query: 'typescript coding' });
    expect(results.length).toBe(2);
    expect(results[0].relevance_score).toBe(1);
    for (const r of results) expect(r.relevance_score).toBeGreaterThan(0);
    for (const r of results) expect(r.relevance_score).toBeLessThanOrEqual(1);
    const recent = db.search({});
    expect(recent.map((r) => r.type)).toEqual(['context', 'instruction', 'fact', 'preference']);
    expect(recent.every((r) => r.relevance_score === 1)).toBe(true);
    expect(db.search({ query: '"' }).length).toBe(4);
  });

  it('filters by tags (all of them, exactly), by type, and honours limit', () => {
    expect(db.search({ tags: ['work'] }).map((r) => r.type)).toEqual(['context', 'instruction']);
    expect(db.search({ tags: ['work', 'coding'] }).map((r) => r.type)).toEqual(['context']);
    expect(db.search({ tags: ['Work', 'CODING'], query: 'typescript' }).map((r) => r.type)).toEqual(['context']);
    expect(db.search({ tags: ['wor'] })).toEqual([]);
    expect(db.search({ type: 'fact' }).map((r) => r.content)).toEqual(["User's dog is named Luna"]);
    expect(db.search({ query: 'typescript', type: 'preference' }).map((r) => r.type)).toEqual(['preference']);
    expect(db.search({ limit: 2 }).length).toBe(2);
    expect(db.search({ limit: 0 }).length).toBe(1);
    expect(db.search({ limit: 1000 }).length).toBe(4);
  });

  it('ranks a bounded number of candidates: rare words are kept, common ones dropped', () => {
    for (let i = 0; i < 30; i++) db.store(entry('fact', `common filler number ${i}`));
    db.rankCandidates = 10;
    // "common" matches 30 entries, over the budget; "luna" one: only the rare word is searched.
    expect(db.search({ query: 'common luna' }).map((r) => r.content)).toEqual(["User's dog is named Luna"]);
    // Only common words: the most recent 10 matches are ranked.
    const window = db.search({ query: 'common filler', limit: 100 });
    expect(window.length).toBe(10);
    expect(window.map((r) => r.content).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `common filler number ${20 + i}`).sort());
    // Nothing matches at all.
    expect(db.search({ query: 'zebra unicorn' })).toEqual([]);
    db.rankCandidates = 500;
    expect(db.search({ query: 'common luna', limit: 100 }).length).toBe(31);
  });
});

describe('brief', () => {
  it('current entries only, behavioral first, newest first, single-line', () => {
    db.store(entry('fact', 'old fact'));
    db.store(entry('preference', 'old preference'));
    db.store(entry('fact', 'new fact\n# Injected header\n> quote'));
    db.store(entry('correction', 'new correction'));
    const brief = db.brief({ maxEntries: 50, maxChars: 10_000, now: clock + 3 * 86_400_000 });
    expect(brief.entries.map((e) => e.content)).toEqual(['new correction', 'old preference', 'new fact # Injected header > quote', 'old fact']);
    expect(brief.entries.map((e) => e.behavioral)).toEqual([true, true, false, false]);
    expect(brief.entries[0].age_days).toBe(3);
    expect(brief).toMatchObject({ entry_count: 4, brief_count: 4 });
    expect(brief.entries[0]).not.toHaveProperty('provenance');
    expect(db.brief({ maxEntries: 50, maxChars: 10_000, includeProvenance: true }).entries[0].provenance).toMatchObject({ session_id: 'sess-1', group: 'main' });
    expect(singleLine('a\r\nb\u2028c\u0085d')).toBe('a b c d');
  });

  it('stops at max_brief_entries or max_brief_chars, whichever comes first', () => {
    for (let i = 0; i < 10; i++) db.store(entry('fact', `fact number ${i} ${'x'.repeat(50)}`));
    expect(db.brief({ maxEntries: 3, maxChars: 10_000 })).toMatchObject({ entry_count: 10, brief_count: 3 });
    const byChars = db.brief({ maxEntries: 50, maxChars: 250, now: clock });
    expect(byChars.brief_count).toBe(3); // each line is about 80 characters
    expect(db.brief({ maxEntries: 0, maxChars: 10_000 }).brief_count).toBe(0);
  });
});

describe('databases', () => {
  it('one file per group, validated names, created on first write only', () => {
    const dbs = new MemoryDatabases(join(dir, 'store'));
    try {
      expect(() => dbs.fileOf('../etc')).toThrow('invalid group name');
      expect(() => dbs.fileOf('a/b')).toThrow('invalid group name');
      expect(() => dbs.fileOf('x'.repeat(65))).toThrow('invalid group name');
      expect(dbs.get('main', false)).toBeNull();
      expect(existsSync(join(dir, 'store', 'main.sqlite'))).toBe(false);
      dbs.get('main', true)!.store(entry('fact', 'hello'));
      expect(statSync(join(dir, 'store', 'main.sqlite')).mode & 0o777).toBe(0o600);
      expect(dbs.existingGroups()).toEqual(['main']);
      expect(dbs.get('main', false)!.count()).toBe(1);
    } finally {
      dbs.closeAll();
    }
  });
});

describe('limits and settings', () => {
  it('counts per session and kind', () => {
    const limits = new SessionLimits({ store: 2, supersede: 1, delete: 1 });
    expect(limits.exhausted('s1', 'store', 'supersede')).toBeNull();
    limits.consume('s1', 'store', 'supersede');
    expect(limits.exhausted('s1', 'store', 'supersede')).toBe('supersede');
    expect(limits.exhausted('s1', 'store')).toBeNull();
    limits.consume('s1', 'store');
    expect(limits.exhausted('s1', 'store')).toBe('store');
    expect(limits.allows('s2', 'store', 'delete')).toBe(true);
  });

  it('counts in any hour: a session that never ends gets its budget back as the hour moves on', () => {
    let now = Date.parse('2026-11-25T10:00:00Z');
    const limits = new SessionLimits({ store: 2, supersede: 1, delete: 1 }, () => now);
    limits.consume('s1', 'store');
    now += 20 * 60_000;
    limits.consume('s1', 'store');
    expect(limits.exhausted('s1', 'store')).toBe('store');
    expect(limits.freesAt('s1', 'store')).toBe(Date.parse('2026-11-25T11:00:00Z'));
    now = Date.parse('2026-11-25T11:00:00Z') + 1;
    expect(limits.exhausted('s1', 'store')).toBeNull();
    limits.consume('s1', 'store');
    expect(limits.exhausted('s1', 'store')).toBe('store');
    expect(limits.freesAt('s1', 'store')).toBe(Date.parse('2026-11-25T11:20:00Z'));
  });

  it('reads the config with defaults; a relative storage_path is under the data directory', () => {
    expect(parseSettings({}, '/data/memory')).toEqual({ storageDir: '/data/memory', maxBriefEntries: 50, maxBriefChars: 10_000, purgeSupersededDays: 90 });
    expect(parseSettings({ storage_path: 'groups', max_brief_entries: 5 }, '/data/memory')).toMatchObject({ storageDir: '/data/memory/groups', maxBriefEntries: 5 });
    expect(parseSettings({ storage_path: '/srv/mem' }, '/data/memory').storageDir).toBe('/srv/mem');
  });
});
