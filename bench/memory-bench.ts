// The memory plugin's benchmark: its modules directly (no ipc, no core), one group's real
// SQLite file (WAL, synchronous=FULL) grown to 1k, 10k and 100k entries by bulk insert.
// At each size: memory_store (one fsynced transaction each), memory_search (a mix of text,
// tag, type and "recent" queries) and the brief, ~200 operations each.
// Human-readable results, then one JSON summary line (the last line of output).
//
// Environment knobs (all optional):
//   MEMORY_BENCH_SIZES=1000,10000,100000   entry counts to measure at
//   MEMORY_BENCH_OPS=200                   operations per measurement
//   MEMORY_BENCH_DIR=/some/dir             where the database lives (default: a temp dir)
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MemoryDatabases } from '../plugins/memory/databases.js';
import { ENTRY_TYPES, type EntryType, type MemoryDb, type Provenance, type SearchOptions } from '../plugins/memory/store.js';
import { stats, type Stats } from './stats.js';

const SIZES = (process.env.MEMORY_BENCH_SIZES ?? '1000,10000,100000').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);
const OPS = Number(process.env.MEMORY_BENCH_OPS ?? 200);
const TARGET = { searchP95Ms: 5, briefMs: 50, atEntries: 100_000 };
const BRIEF_LIMITS = { maxEntries: 50, maxChars: 10_000 };
const GROUP = 'bench';

const out = (line = ''): void => void process.stdout.write(`${line}\n`);

const fmt = (s: Stats): string => `p50 ${s.p50.toFixed(3)} ms  p95 ${s.p95.toFixed(3)}  p99 ${s.p99.toFixed(3)}  mean ${s.mean.toFixed(3)}  max ${s.max.toFixed(3)}  (n=${s.n})`;
const mark = (ok: boolean): string => (ok ? 'MET' : 'MISSED');

// ---- a deterministic synthetic corpus ----------------------------------------------------

/** mulberry32: the same corpus and queries on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = rng(42);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'po', 'da', 'fe', 'gu', 'ha', 'ji', 'ko', 'ly', 'mo', 'nu', 'ri'];
const VOCABULARY = Array.from({ length: 5000 }, (_, i) => {
  let w = '';
  for (let n = i + 7, k = 0; k < 2 + (i % 3); k++, n = Math.floor(n / SYLLABLES.length) + k * 7) w += SYLLABLES[n % SYLLABLES.length];
  return `${w}${i}`;
});
const COMMON = ['user', 'prefers', 'always', 'project', 'meeting', 'morning', 'coffee', 'code', 'review', 'family', 'weekend', 'email', 'calendar', 'python', 'typescript'];
const TAGS = Array.from({ length: 200 }, (_, i) => `tag${i}`);

/** Zipf-like: low indices far more often (s ≈ 1). */
function zipfWord(): string {
  const i = Math.floor(Math.exp(random() * Math.log(VOCABULARY.length))) - 1;
  return VOCABULARY[Math.min(VOCABULARY.length - 1, Math.max(0, i))];
}

function sentence(): string {
  const words: string[] = [];
  const n = 8 + Math.floor(random() * 18);
  for (let i = 0; i < n; i++) words.push(random() < 0.25 ? pick(COMMON) : zipfWord());
  return words.join(' ');
}

function tagsFor(): string[] {
  const n = Math.floor(random() * 4);
  return Array.from({ length: n }, () => TAGS[Math.min(TAGS.length - 1, Math.floor(Math.exp(random() * Math.log(TAGS.length))) - 1)]);
}

let clock = Date.parse('2024-01-01T00:00:00Z');
function provenance(session = 'bench-session'): Provenance {
  clock += 1000 + Math.floor(random() * 60_000);
  return { session_id: session, group: GROUP, timestamp: new Date(clock).toISOString(), correlation: 'bench', external: false };
}

function bulkInsert(db: MemoryDb, count: number): number {
  const started = performance.now();
  const BATCH = 5000;
  for (let done = 0; done < count; done += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, count - done) }, () => ({
      type: pick(ENTRY_TYPES) as EntryType,
      content: sentence(),
      tags: tagsFor(),
      provenance: provenance(`s-${Math.floor(random() * 1000)}`),
    }));
    db.storeMany(batch);
  }
  // About 5% of entries superseded, as a long-lived memory would have.
  db.db.prepare(`UPDATE memory_entries SET superseded_by = 'mem-bench-replacement', superseded_at = created_at WHERE superseded_by IS NULL AND abs(random()) % 20 = 0`).run();
  return performance.now() - started;
}

function searchMix(n: number): { kind: string; options: SearchOptions }[] {
  const mix: { kind: string; options: SearchOptions }[] = [];
  for (let i = 0; i < n; i++) {
    const r = i % 10;
    if (r < 4) mix.push({ kind: 'text', options: { query: Array.from({ length: 1 + (i % 3) }, zipfWord).join(' ') } });
    else if (r < 5) mix.push({ kind: 'text-common', options: { query: `${pick(COMMON)} ${zipfWord()}` } });
    else if (r < 6) mix.push({ kind: 'text+tag', options: { query: zipfWord(), tags: [pick(TAGS.slice(0, 20))] } });
    else if (r < 7) mix.push({ kind: 'text+type', options: { query: `${zipfWord()} ${zipfWord()}`, type: pick(ENTRY_TYPES) } });
    else if (r < 8) mix.push({ kind: 'recent', options: {} });
    else if (r < 9) mix.push({ kind: 'tag', options: { tags: [pick(TAGS.slice(0, 50))] } });
    else mix.push({ kind: 'hostile', options: { query: pick(['"', 'NEAR(', 'AND OR NOT', '*', '-', ':', `${zipfWord()}" OR "x`, `col:${zipfWord()}*`]) } });
  }
  return mix;
}

interface SizeResult {
  entries: number;
  fileMb: number;
  bulkInsertS: number;
  store: Stats;
  search: Stats;
  searchByKind: Record<string, Stats>;
  brief: Stats;
  briefCount: number;
}

function measure(db: MemoryDb, entries: number): Omit<SizeResult, 'bulkInsertS' | 'fileMb'> {
  // memory_store: each call its own fsynced transaction, as the handler does it.
  const store: number[] = [];
  for (let i = 0; i < OPS; i++) {
    const entry = { type: pick(ENTRY_TYPES) as EntryType, content: sentence(), tags: tagsFor(), supersedes: null, provenance: provenance() };
    const t = performance.now();
    db.store(entry);
    store.push(performance.now() - t);
  }

  const mix = searchMix(OPS);
  for (const { options } of mix.slice(0, 20)) db.search(options); // warm the page cache
  const search: number[] = [];
  const byKind = new Map<string, number[]>();
  for (const { kind, options } of mix) {
    const t = performance.now();
    db.search({ ...options, limit: 20 });
    const ms = performance.now() - t;
    search.push(ms);
    byKind.set(kind, [...(byKind.get(kind) ?? []), ms]);
  }

  const brief: number[] = [];
  let briefCount = 0;
  for (let i = 0; i < OPS; i++) {
    const t = performance.now();
    briefCount = db.brief(BRIEF_LIMITS).brief_count;
    brief.push(performance.now() - t);
  }
  return {
    entries,
    store: stats(store),
    search: stats(search),
    searchByKind: Object.fromEntries([...byKind].map(([k, v]) => [k, stats(v)])),
    brief: stats(brief),
    briefCount,
  };
}

function main(): void {
  const benchStart = performance.now();
  const dir = process.env.MEMORY_BENCH_DIR ?? mkdtempSync(join(os.tmpdir(), 'carapace-memory-bench-'));
  mkdirSync(dir, { recursive: true });
  const cpus = os.cpus();
  const machine = { cpu: cpus[0]?.model ?? 'unknown', cores: cpus.length, node: process.version, platform: `${os.platform()} ${os.release()}`, dir };
  out('Carapace memory plugin benchmark');
  out(`CPU        ${machine.cpu} × ${machine.cores} cores`);
  out(`Node       ${machine.node}; ${machine.platform}`);
  out(`Database   ${dir}/${GROUP}.sqlite (WAL, synchronous=FULL); ${OPS} operations per measurement`);
  out();

  const databases = new MemoryDatabases(dir);
  const results: SizeResult[] = [];
  try {
    const db = databases.get(GROUP, true)!;
    for (const size of SIZES) {
      const missing = size - db.count();
      const insertMs = missing > 0 ? bulkInsert(db, missing) : 0;
      db.db.pragma('wal_checkpoint(TRUNCATE)');
      const measured = measure(db, db.count());
      const fileMb = Math.round((statSync(databases.fileOf(GROUP)).size / 1048576) * 10) / 10;
      const result: SizeResult = { ...measured, fileMb, bulkInsertS: Math.round(insertMs / 100) / 10 };
      results.push(result);
      const isTarget = size === TARGET.atEntries;
      out(`${result.entries} entries  (${fileMb} MB; bulk insert of ${missing > 0 ? missing : 0} took ${result.bulkInsertS} s)`);
      out(`  memory_store   ${fmt(result.store)}`);
      out(`  memory_search  ${fmt(result.search)}${isTarget ? `  [target p95 ≤ ${TARGET.searchP95Ms} ms: ${mark(result.search.p95 <= TARGET.searchP95Ms)}]` : ''}`);
      for (const [kind, s] of Object.entries(result.searchByKind)) out(`     ${kind.padEnd(12)} ${fmt(s)}`);
      out(`  brief          ${fmt(result.brief)}  (${result.briefCount} entries)${isTarget ? `  [target ≤ ${TARGET.briefMs} ms (p95): ${mark(result.brief.p95 <= TARGET.briefMs)}]` : ''}`);
      out();
    }
  } finally {
    databases.closeAll();
    if (!process.env.MEMORY_BENCH_DIR) rmSync(dir, { recursive: true, force: true });
  }
  const at = results.find((r) => r.entries >= TARGET.atEntries && r.entries < TARGET.atEntries + 10 * OPS);
  const summary = {
    bench: 'memory',
    machine,
    targets: TARGET,
    met: at ? { searchP95: at.search.p95 <= TARGET.searchP95Ms, brief: at.brief.p95 <= TARGET.briefMs } : null,
    sizes: results,
    totalSeconds: Math.round((performance.now() - benchStart) / 100) / 10,
  };
  out(`Total ${summary.totalSeconds} s`);
  out(JSON.stringify(summary));
}

main();
