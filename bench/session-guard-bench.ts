// What one hostile session costs everyone else (`make bench`). For each attack (request
// flood, unread replies, connection flood) a fresh core (bench/core-process.ts, the session
// guard's default limits) serves two sessions: a victim group calls `ipc` one call at a
// time, as Claude Code does, first alone (the baseline) and then while a local process
// attacks the other session with raw ZMTP (core/test/support/zmtp-attacker.ts). Printed:
// the victim's p50/p99 in both windows and their ratios (goal: p99 within 2x), how long
// the core took to quarantine the attacker, and the core's RSS after the attack window
// (goal: at most 200 MB). Human-readable lines, then one JSON summary line.
//
//   BENCH_GUARD_ATTACK_S=60     length of each attack window (the victim keeps calling)
//   BENCH_GUARD_BASELINE_S=10   length of each baseline window
//   BENCH_GUARD_ATTACKS=flood,unread,connections
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { attackLocally, type AttackMode, type AttackResult } from '../core/test/support/zmtp-attacker.js';
import { r3, stats, type Stats } from './stats.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const IPC_BIN = process.env.CARAPACE_IPC_BIN ?? join(ROOT, 'dist/bin/ipc');
const CORE_PROCESS = join(ROOT, 'dist/bench/core-process.js');
const ATTACK_MS = Number(process.env.BENCH_GUARD_ATTACK_S ?? 60) * 1000;
const BASELINE_MS = Number(process.env.BENCH_GUARD_BASELINE_S ?? 10) * 1000;
const VICTIM_PERIOD_MS = 100;
const ATTACKS = (process.env.BENCH_GUARD_ATTACKS ?? 'flood,unread,connections').split(',').map((s) => s.trim()) as AttackMode[];
const ATTACK_ENV: Record<AttackMode, Record<string, number>> = {
  flood: {},
  unread: { ATTACK_COUNT: 1_000_000, ATTACK_TEXT_BYTES: 400_000 },
  connections: { ATTACK_COUNT: 20_000 },
};

interface Ready {
  sessions: { id: string; socketPath: string }[];
  pid: number;
  dir: string;
}

const out = (line: string): void => void process.stdout.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function rssMb(pid: number): number {
  try {
    const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
    return Math.round((kb / 1024) * 10) / 10;
  } catch {
    return NaN;
  }
}

async function startCore(): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = spawn(process.execPath, [CORE_PROCESS, '2'], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, BENCH_WATCH_STDIN: '1', BENCH_SESSION_DEFAULTS: '1' } });
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Ready>((resolveReady, rejectReady) => {
    const timer = setTimeout(() => rejectReady(new Error('core-process did not report ready within 30 s')), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolveReady(JSON.parse(line) as Ready);
    });
    child.once('exit', (code) => rejectReady(new Error(`core-process exited (code ${code})`)));
  });
  return { child, ready };
}

async function stopCore(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

function ipcOnce(socketPath: string): Promise<{ ms: number; ok: boolean }> {
  const t0 = performance.now();
  return new Promise((resolveCall) => {
    execFile(IPC_BIN, ['tool.invoke.echo', '{"text":"victim"}'], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${socketPath}`, CARAPACE_IPC_TIMEOUT_MS: '20000' } }, (error) =>
      resolveCall({ ms: performance.now() - t0, ok: !error }),
    );
  });
}

/**
 * The victim's calls, one at a time, one every VICTIM_PERIOD_MS at most for `ms`: a busy
 * agent, well inside its own session's budget (20 a second).
 */
async function victim(socketPath: string, ms: number): Promise<{ stats: Stats; failed: number; calls: { at: number; ms: number }[] }> {
  const latencies: number[] = [];
  const calls: { at: number; ms: number }[] = [];
  let failed = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const at = Date.now();
    const r = await ipcOnce(socketPath);
    calls.push({ at, ms: r.ms });
    if (r.ok) latencies.push(r.ms);
    else failed++;
    await sleep(Math.max(0, VICTIM_PERIOD_MS - r.ms));
  }
  return { stats: stats(latencies), failed, calls };
}

/** When the core quarantined the attacker, from its audit file. */
function quarantinedAt(dir: string, session: string): { at: number; reason: string } | null {
  const file = join(dir, 'logs', 'audit.jsonl');
  if (!existsSync(file)) return null;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes('"CRITICAL"') || !line.includes(session)) continue;
    const entry = JSON.parse(line) as { timestamp: string; reason: string };
    return { at: Date.parse(entry.timestamp), reason: entry.reason };
  }
  return null;
}

interface AttackFigures {
  attack: AttackMode;
  baseline: Stats;
  underAttack: Stats;
  victimFailed: number;
  p50Ratio: number;
  p99Ratio: number;
  quarantineMs: number | null;
  /** The slowest victim call started before the quarantine (or in the attack's first second). */
  slowestWhileAttackedMs: number;
  quarantineReason: string | null;
  attacker: AttackResult;
  coreRssBeforeMb: number;
  coreRssAfterMb: number;
}

async function runAttack(mode: AttackMode): Promise<AttackFigures> {
  const { child, ready } = await startCore();
  try {
    const [victimSession, attackerSession] = ready.sessions;
    for (let i = 0; i < 20; i++) await ipcOnce(victimSession.socketPath); // warm up
    const baseline = await victim(victimSession.socketPath, BASELINE_MS);
    const rssBefore = rssMb(ready.pid);
    const startedAt = Date.now();
    const attacking = attackLocally(attackerSession.socketPath, mode, { ATTACK_DURATION_MS: ATTACK_MS, ...ATTACK_ENV[mode] });
    const during = await victim(victimSession.socketPath, ATTACK_MS);
    const attacker = await attacking;
    await sleep(200);
    const rssAfter = rssMb(ready.pid);
    const q = quarantinedAt(ready.dir, attackerSession.id);
    return {
      attack: mode,
      baseline: baseline.stats,
      underAttack: during.stats,
      victimFailed: baseline.failed + during.failed,
      p50Ratio: r3(during.stats.p50 / baseline.stats.p50),
      p99Ratio: r3(during.stats.p99 / baseline.stats.p99),
      quarantineMs: q ? q.at - startedAt : null,
      slowestWhileAttackedMs: r3(Math.max(0, ...during.calls.filter((c) => c.at <= (q?.at ?? startedAt + 1000)).map((c) => c.ms))),
      quarantineReason: q?.reason ?? null,
      attacker,
      coreRssBeforeMb: rssBefore,
      coreRssAfterMb: rssAfter,
    };
  } finally {
    await stopCore(child);
  }
}

async function main(): Promise<void> {
  out(`Session guard: another group's ipc while one session attacks (baseline ${BASELINE_MS / 1000} s, attack ${ATTACK_MS / 1000} s each, default limits)`);
  const all: AttackFigures[] = [];
  for (const mode of ATTACKS) {
    const f = await runAttack(mode);
    all.push(f);
    out(`  ${mode.padEnd(12)} victim p50 ${f.baseline.p50} → ${f.underAttack.p50} ms (x${f.p50Ratio}), p99 ${f.baseline.p99} → ${f.underAttack.p99} ms (x${f.p99Ratio}, goal ≤ 2), ${f.underAttack.n} calls, ${f.victimFailed} failed`);
    out(`  ${''.padEnd(12)} attacker quarantined after ${f.quarantineMs ?? 'never'} ms (${f.quarantineReason ?? '-'}); it sent ${f.attacker.sent} frames, opened ${f.attacker.opened} connections; slowest victim call until then ${f.slowestWhileAttackedMs} ms`);
    out(`  ${''.padEnd(12)} core RSS ${f.coreRssBeforeMb} MB before, ${f.coreRssAfterMb} MB after the attack window (goal ≤ 200 MB)`);
  }
  out(JSON.stringify({ sessionGuard: all }));
}

main().catch((err: unknown) => {
  process.stderr.write(`session-guard bench failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
