// `make bench BASELINE=<git ref>`: the pipeline figures of the working tree beside those of
// another commit, measured in the same run, alternately (A B, then B A, ...), so that a busy
// or slow machine weighs on both alike; each figure printed with its ratio to the baseline.
// The ref is built once in a worktree of its own (kept in the temp folder for the next run):
// its own dependencies (npm ci, unless its lockfile is ours), its own ipc and TypeScript.
//
//   BASELINE=<ref>            what to compare with (a commit, a tag, main~10)
//   BASELINE_ROUNDS=2         how many times each tree is measured
//   BENCH_PHASES=dealer,throughput   the phases each run measures (bench/run.ts)
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const out = (line = ''): void => void process.stdout.write(`${line}\n`);

interface Figures {
  [name: string]: number;
}

/** The commit a ref names, or a clear error. */
function commitOf(ref: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`BASELINE=${ref} is not a commit this repository knows (git rev-parse failed)`);
  }
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): void {
  const r = spawnSync(cmd, args, { cwd, env, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd} (exit ${r.status})`);
}

/** A built tree of `commit`, made once. */
function prepare(commit: string): string {
  const dir = join(os.tmpdir(), `carapace-baseline-${commit.slice(0, 12)}`);
  if (!existsSync(join(dir, '.git'))) run('git', ['worktree', 'add', '--force', '--detach', dir, commit], ROOT);
  if (!existsSync(join(dir, 'node_modules'))) {
    const same = readFileSync(join(dir, 'package-lock.json'), 'utf8') === readFileSync(join(ROOT, 'package-lock.json'), 'utf8');
    if (same) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    else run('npm', ['ci', '--no-audit', '--no-fund'], dir);
  }
  // Never make's own npm ci: through the symlink it would empty this tree's node_modules.
  if (!existsSync(join(dir, 'dist', 'bench', 'run.js'))) run('make', ['-o', 'node_modules', 'build'], dir);
  return dir;
}

/** One bench run of the tree at `dir`: its JSON summary's figures. */
function measure(dir: string): Figures {
  const r = spawnSync(process.execPath, [join(dir, 'dist', 'bench', 'run.js')], {
    cwd: dir,
    env: { ...process.env, BENCH_PHASES: process.env.BENCH_PHASES ?? 'dealer,throughput' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  let summary: { dealerLatency?: { stats: { p50: number; p99: number } }; throughput?: { clients: number; depth: number; reqPerSec: number; cpuUsPerReq: { core: number; host: number; plugins?: number } }[]; errors?: number };
  try {
    summary = JSON.parse(last) as typeof summary;
  } catch {
    throw new Error(`the bench in ${dir} printed no summary (exit ${r.status}):\n${r.stdout.slice(-2000)}${r.stderr.slice(-2000)}`);
  }
  const figures: Figures = {};
  if (summary.dealerLatency) {
    figures['DEALER round trip p50 (ms)'] = summary.dealerLatency.stats.p50;
    figures['DEALER round trip p99 (ms)'] = summary.dealerLatency.stats.p99;
  }
  for (const t of summary.throughput ?? []) {
    figures[`throughput ${t.clients} × ${t.depth} (req/s)`] = t.reqPerSec;
    figures[`core CPU per request ${t.clients} × ${t.depth} (µs)`] = t.cpuUsPerReq.core;
    figures[`host CPU per request ${t.clients} × ${t.depth} (µs)`] = t.cpuUsPerReq.host;
    // A tree whose plugins ran inside the host reports no plugin processes: there the host's figure is already the sum.
    figures[`host + plugin processes CPU per request ${t.clients} × ${t.depth} (µs)`] = Math.round((t.cpuUsPerReq.host + (t.cpuUsPerReq.plugins ?? 0)) * 100) / 100;
  }
  figures.errors = summary.errors ?? 0;
  return figures;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

function main(): void {
  const ref = process.env.BASELINE;
  if (!ref) throw new Error('BASELINE=<git ref> names what to compare with');
  const rounds = Math.max(1, Number(process.env.BASELINE_ROUNDS ?? 2) || 2);
  const commit = commitOf(ref);
  const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
  const base = prepare(commit);
  const trees = { current: ROOT, baseline: base };
  const results: Record<'current' | 'baseline', Figures[]> = { current: [], baseline: [] };
  for (let round = 0; round < rounds; round++) {
    // A B, then B A: neither tree always gets the quieter half of the run.
    const order: ('current' | 'baseline')[] = round % 2 === 0 ? ['current', 'baseline'] : ['baseline', 'current'];
    for (const which of order) {
      out(`round ${round + 1}/${rounds}: ${which} …`);
      results[which].push(measure(trees[which]));
    }
  }
  const cpu = os.cpus();
  out();
  out(`Pipeline figures, ${head}${dirty ? ' (with uncommitted changes)' : ''} against ${ref} (${commit.slice(0, 12)}), ${rounds} alternating round${rounds > 1 ? 's' : ''} each, on ${cpu.length} × ${cpu[0]?.model ?? 'CPU'}, Node ${process.version}`);
  out(`| figure | this tree (each round) | baseline (each round) | ratio of medians |`);
  out(`| --- | --- | --- | --- |`);
  const summary: Record<string, { current: number[]; baseline: number[]; ratio: number | null }> = {};
  for (const name of Object.keys(results.current[0] ?? {})) {
    const current = results.current.map((f) => f[name] ?? NaN);
    const baseline = results.baseline.map((f) => f[name] ?? NaN);
    // A figure that is 0 in the baseline (errors) has no ratio.
    const ratio = median(baseline) === 0 ? null : Math.round((median(current) / median(baseline)) * 100) / 100;
    summary[name] = { current, baseline, ratio };
    out(`| ${name} | ${current.join(', ')} | ${baseline.join(', ')} | ${ratio === null ? '—' : `×${ratio}`} |`);
  }
  out(JSON.stringify({ baseline: { ref, commit }, head, dirty, rounds, figures: summary }));
}

main();
