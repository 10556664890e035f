// The Carapace benchmark driver (`make bench`). Starts bench/core-process.ts (a real core
// in its own process, which spawns the real plugin host), then measures:
//   a. ipc end to end (process start → pipeline → echo handler → stdout), next to the
//      same launch of no-op baselines, from Node's spawn and from a bash loop;
//   b. pipeline latency without process start (one raw DEALER, one request at a time);
//   c. throughput with concurrent DEALER clients, and with concurrent ipc loops;
//   d. core and plugin host RSS (idle, settled, peak under load) and CPU per request.
// Human-readable results, then one JSON summary line (the last line of output).
//
// Environment knobs (all optional):
//   BENCH_PHASES=latency,ipc,dealer,throughput,ipcload   which phases to run (default all)
//   BENCH_PROFILE_DIR=/some/dir   run core and plugin host under --cpu-prof, writing
//                                 core.cpuprofile and host.cpuprofile there; summarise
//                                 with `node dist/bench/profile-summary.js <file>`
//   BENCH_DURATION_MS=5000        length of each throughput window
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as zmq from 'zeromq';
import { r3, stats, type Stats } from './stats.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const IPC_BIN = process.env.CARAPACE_IPC_BIN ?? join(ROOT, 'dist/bin/ipc');
const CORE_PROCESS = join(ROOT, 'dist/bench/core-process.js');
const TRUE_BIN = existsSync('/bin/true') ? '/bin/true' : '/usr/bin/true';

const SESSIONS = 8;
const TOPIC = 'tool.invoke.echo';
const ARGS_JSON = '{"text":"x"}';
const SPAWN_WARMUP = 50;
const SPAWN_N = 1000;
const DEALER_WARMUP = 500;
const DEALER_N = 5000;
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5000);
const IPC_LOOPS = 8;
const PHASES = new Set((process.env.BENCH_PHASES ?? 'latency,ipc,dealer,throughput,ipcload').split(',').map((s) => s.trim()));
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR ? resolve(process.env.BENCH_PROFILE_DIR) : null;

const TARGET = { p50Ms: 2, p99Ms: 5, reqPerSec: 10_000, idleRssMb: 80 };

// ---- small helpers -------------------------------------------------------------------

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const r2 = (x: number): number => Math.round(x * 100) / 100;
const out = (line = ''): void => void process.stdout.write(`${line}\n`);

const fmtStats = (s: Stats): string =>
  `p50 ${s.p50.toFixed(3)} ms  p90 ${s.p90.toFixed(3)}  p99 ${s.p99.toFixed(3)}  mean ${s.mean.toFixed(3)}  min ${s.min.toFixed(3)}  max ${s.max.toFixed(3)}  (n=${s.n})`;
const mark = (ok: boolean): string => (ok ? 'MET' : 'MISSED');
const latencyTargets = (s: Stats): string =>
  `[target p50 ≤ ${TARGET.p50Ms} ms: ${mark(s.p50 <= TARGET.p50Ms)}; p99 ≤ ${TARGET.p99Ms} ms: ${mark(s.p99 <= TARGET.p99Ms)}]`;

function procStatus(pid: number | null | undefined): { rssMb: number; hwmMb: number } | null {
  if (!pid) return null;
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
    return { rssMb: r2(kb('VmRSS') / 1024), hwmMb: r2(kb('VmHWM') / 1024) };
  } catch {
    return null;
  }
}

let CLK_TCK = 100;
try {
  CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // keep the usual 100
}

/** CPU seconds (user + system) a process has used so far. */
function procCpu(pid: number | null | undefined): number {
  if (!pid) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime (fields 14, 15)
  } catch {
    return NaN;
  }
}

/**
 * CPU seconds so far of each child process of `pid`, by pid: the plugin host's plugin
 * processes (one per plugin), whose work is no longer in the host's own figure.
 */
function childrenCpu(pid: number | null | undefined): Map<number, number> {
  const cpu = new Map<number, number>();
  if (!pid) return cpu;
  try {
    for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number)) {
      const seconds = procCpu(child);
      if (!Number.isNaN(seconds)) cpu.set(child, seconds);
    }
  } catch {
    // no children file (an old kernel): none counted
  }
  return cpu;
}

/** CPU seconds the children in `after` used since `before` (one started meanwhile: all of its own). */
function childrenDelta(before: Map<number, number>, after: Map<number, number>): number {
  let seconds = 0;
  for (const [pid, now] of after) seconds += now - (before.get(pid) ?? 0);
  return seconds;
}

/** Machine-wide CPU seconds from /proc/stat: busy (user+nice+system+irq+softirq), steal, idle. */
function machineCpu(): { busy: number; steal: number; idle: number } {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = f;
    return { busy: (user + nice + system + irq + softirq) / CLK_TCK, steal: (steal ?? 0) / CLK_TCK, idle: (idle + iowait) / CLK_TCK };
  } catch {
    return { busy: NaN, steal: NaN, idle: NaN };
  }
}

interface MachineLoad {
  /** CPU-seconds the whole machine was busy, and how much of it was not the core, host or driver. */
  busy: number;
  others: number;
  steal: number;
  idle: number;
}

function machineDelta(m0: ReturnType<typeof machineCpu>, ours: number): MachineLoad {
  const m1 = machineCpu();
  const busy = m1.busy - m0.busy;
  return { busy: r2(busy), others: r2(Math.max(0, busy - ours)), steal: r2(m1.steal - m0.steal), idle: r2(m1.idle - m0.idle) };
}

const driverCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function alive(pid: number | null | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// ---- the core under test -------------------------------------------------------------

interface Ready {
  sessions: { id: string; socketPath: string }[];
  pid: number;
  hostPid: number | null;
  dir: string;
  startupMs: number;
}

interface CoreHandle {
  child: ChildProcess;
  ready: Ready;
  lines: ReturnType<typeof createInterface>;
}

interface CoreMem {
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  arrayBuffersMb: number;
  heapLimitMb: number;
}

/** The core's own view of its memory (V8 heap vs the rest), asked over its stdin. */
async function coreMem(handle: CoreHandle, afterGc = false): Promise<{ mem: CoreMem; auditRecorded: number } | null> {
  return new Promise((resolveMem) => {
    const timer = setTimeout(() => {
      handle.lines.off('line', onLine);
      resolveMem(null);
    }, 3000);
    const onLine = (line: string): void => {
      clearTimeout(timer);
      handle.lines.off('line', onLine);
      try {
        resolveMem(JSON.parse(line) as { mem: CoreMem; auditRecorded: number });
      } catch {
        resolveMem(null);
      }
    };
    handle.lines.on('line', onLine);
    handle.child.stdin!.write(afterGc ? 'memgc\n' : 'mem\n');
  });
}

const fmtMem = (m: CoreMem | undefined): string =>
  m ? `V8 heap used ${m.heapUsedMb} MB of ${m.heapTotalMb} MB allocated, external ${m.externalMb} MB (array buffers ${m.arrayBuffersMb} MB)` : 'n/a';

let running: CoreHandle | null = null;

async function startCore(): Promise<CoreHandle> {
  const nodeArgs: string[] = ['--expose-gc']; // only used on request, after the load phases
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_WATCH_STDIN: '1' };
  if (PROFILE_DIR) {
    mkdirSync(PROFILE_DIR, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, '--cpu-prof-name=core.cpuprofile');
    env.BENCH_HOST_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${PROFILE_DIR} --cpu-prof-name=host.cpuprofile`;
  }
  const child = spawn(process.execPath, [...nodeArgs, CORE_PROCESS, String(SESSIONS)], { stdio: ['pipe', 'pipe', 'inherit'], env });
  const lines = createInterface({ input: child.stdout! });
  // If it never gets ready, SIGTERM lets it stop its plugin host and remove its directory.
  const giveUp = (err: unknown): never => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    throw err;
  };
  const ready = await new Promise<Ready>((resolveReady, rejectReady) => {
    const timer = setTimeout(() => rejectReady(new Error('core-process did not report ready within 30 s')), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      try {
        resolveReady(JSON.parse(line) as Ready);
      } catch {
        rejectReady(new Error(`core-process printed something unexpected: ${line}`));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      rejectReady(new Error(`core-process exited before ready (code ${code}, signal ${signal})`));
    });
  }).catch(giveUp);
  running = { child, ready, lines };
  return running;
}

async function stopCore(handle: CoreHandle): Promise<{ clean: boolean; ms: number }> {
  const t0 = performance.now();
  const { child, ready } = handle;
  let clean = true;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      clean = false;
      child.kill('SIGKILL');
    }, 20_000);
    await exited;
    clearTimeout(timer);
    if (child.exitCode !== 0) clean = false;
  }
  for (let i = 0; i < 50 && alive(ready.hostPid); i++) await sleep(100);
  if (alive(ready.hostPid)) {
    clean = false;
    process.kill(ready.hostPid!, 'SIGKILL');
  }
  rmSync(ready.dir, { recursive: true, force: true });
  running = null;
  return { clean, ms: Math.round(performance.now() - t0) };
}

/** Last-resort cleanup, synchronous, for exits we did not plan. */
function emergencyCleanup(): void {
  if (running) {
    const { child, ready } = running;
    try {
      if (child.exitCode === null) child.kill('SIGKILL');
    } catch {
      /* gone */
    }
    try {
      if (alive(ready.hostPid)) process.kill(ready.hostPid!, 'SIGKILL');
    } catch {
      /* gone */
    }
    rmSync(ready.dir, { recursive: true, force: true });
    running = null;
  }
}

process.on('exit', emergencyCleanup);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    emergencyCleanup();
    process.exit(130);
  });
}

// ---- phase a: process launch ---------------------------------------------------------

interface Launcher {
  name: string;
  cmd: string;
  /** Arguments (default: the echo call) and the exit code that counts as success (default 0). */
  args?: string[];
  expect?: number;
}

const argsOf = (l: Launcher): string[] => l.args ?? [TOPIC, ARGS_JSON];

/** ipc next to each baseline launcher: the difference and the ratio, p50 and mean. */
function outIpcVsBaselines(launchers: Launcher[], results: Record<string, { stats: Stats }>): void {
  const ipc = results.ipc.stats;
  for (const l of launchers.filter((x) => x.name !== 'ipc')) {
    const b = results[l.name].stats;
    out(`     ipc − ${l.name}: p50 ${(ipc.p50 - b.p50).toFixed(3)} ms, mean ${(ipc.mean - b.mean).toFixed(3)} ms; ratio ipc/${l.name}: p50 ${(ipc.p50 / b.p50).toFixed(2)}×, mean ${(ipc.mean / b.mean).toFixed(2)}×`);
  }
}

/** One launch with Node's spawn: from before spawn() to 'close' (exited, stdout drained). */
function spawnOnce(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; code: number | null; stdout: string }> {
  return new Promise((resolveRun) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.resume();
    child.once('error', () => resolveRun({ ms: performance.now() - t0, code: -1, stdout }));
    child.once('close', (code) => resolveRun({ ms: performance.now() - t0, code, stdout }));
  });
}

function echoOk(stdout: string): boolean {
  try {
    const parsed = JSON.parse(stdout) as { echoed?: { text?: unknown } };
    return parsed.echoed?.text === 'x';
  } catch {
    return false;
  }
}

/** Sequential launches from Node, the launchers interleaved so they see the same conditions. */
async function nodeSpawnSeries(launchers: Launcher[], env: NodeJS.ProcessEnv): Promise<Record<string, { stats: Stats; errors: number }>> {
  const samples: Record<string, number[]> = {};
  const errors: Record<string, number> = {};
  for (const l of launchers) {
    samples[l.name] = [];
    errors[l.name] = 0;
  }
  for (let i = 0; i < SPAWN_WARMUP + SPAWN_N; i++) {
    for (const l of launchers) {
      const r = await spawnOnce(l.cmd, argsOf(l), env);
      const bad = r.code !== (l.expect ?? 0) || (l.name === 'ipc' && !echoOk(r.stdout));
      if (i >= SPAWN_WARMUP) {
        samples[l.name].push(r.ms);
        if (bad) errors[l.name]++;
      }
    }
  }
  const result: Record<string, { stats: Stats; errors: number }> = {};
  for (const l of launchers) result[l.name] = { stats: stats(samples[l.name]), errors: errors[l.name] };
  return result;
}

const SEQ_LOOP = `
set -u
cmd=$1; n=$2; warm=$3; expect=$4; shift 4
for ((i = 0; i < warm; i++)); do "$cmd" "$@" >/dev/null 2>&1; [[ $? -eq $expect ]] || exit 3; done
fails=0; times=()
t0=\${EPOCHREALTIME/./}
for ((i = 0; i < n; i++)); do
  a=\${EPOCHREALTIME/./}
  "$cmd" "$@" >/dev/null 2>&1; rc=$?
  b=\${EPOCHREALTIME/./}
  [[ $rc -eq $expect ]] || fails=$((fails + 1))
  times+=($((b - a)))
done
t1=\${EPOCHREALTIME/./}
echo "$((t1 - t0)) $fails"
echo "\${times[*]}"
`;

const PAR_LOOP = `
set -u
cmd=$1; dur=$2; shift 2
n=0; fails=0
start=\${EPOCHREALTIME/./}
end=$(( start + dur ))
while (( \${EPOCHREALTIME/./} < end )); do
  if "$cmd" "$@" >/dev/null 2>&1; then n=$((n + 1)); else fails=$((fails + 1)); fi
done
echo "$n $fails $(( \${EPOCHREALTIME/./} - start ))"
`;

function runBash(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolveRun, rejectRun) => {
    execFile('bash', ['-c', script, 'bench', ...args], { env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) rejectRun(new Error(`bash loop failed: ${err.message} ${stderr}`));
      else resolveRun(stdout);
    });
  });
}

/** Sequential launches from a bash loop (fork+exec, no Node in the way), each call timed. */
async function bashSeries(l: Launcher, env: NodeJS.ProcessEnv): Promise<{ stats: Stats; errors: number; perCallMs: number }> {
  const text = await runBash(SEQ_LOOP, [l.cmd, String(SPAWN_N), String(SPAWN_WARMUP), String(l.expect ?? 0), ...argsOf(l)], env);
  const [head, times] = text.trim().split('\n');
  const [totalUs, fails] = head.split(' ').map(Number);
  const samples = times.trim().split(/\s+/).map((us) => Number(us) / 1000);
  return { stats: stats(samples), errors: fails, perCallMs: r3(totalUs / 1000 / SPAWN_N) };
}

/** A static Rust no-op, the fairest baseline for the static Rust `ipc`: the same Debian
 *  rustc and the same flags as ipc/Cargo.toml and ipc/.cargo/config.toml; null if it can't
 *  be built. Built inside the core's temporary directory, so it goes wherever that goes. */
function buildRustNoop(parent: string): string | null {
  try {
    const dir = join(parent, 'rust-noop');
    mkdirSync(dir);
    writeFileSync(join(dir, 'main.rs'), 'fn main() {}\n');
    execFileSync(
      '/usr/bin/rustc',
      [
        '--edition=2021', '--target=x86_64-unknown-linux-gnu',
        '-C', 'opt-level=3', '-C', 'lto', '-C', 'codegen-units=1', '-C', 'panic=abort', '-C', 'strip=symbols',
        '-C', 'target-feature=+crt-static', '-C', 'relocation-model=static',
        '-o', 'noop', 'main.rs',
      ],
      { cwd: dir, stdio: 'ignore', timeout: 60_000 },
    );
    return join(dir, 'noop');
  } catch {
    return null;
  }
}

// ---- phases b and c: raw DEALER clients ------------------------------------------------

const request = (correlation: string): Buffer =>
  Buffer.from(`{"topic":"${TOPIC}","correlation":"${correlation}","arguments":{"text":"x"}}`);

function replyOk(frame: Buffer, correlation: string | null): string | null {
  try {
    const env = JSON.parse(frame.toString('utf8')) as { correlation?: string; payload?: { error?: unknown; result?: { echoed?: { text?: unknown } } } };
    if (correlation !== null && env.correlation !== correlation) return null;
    if (env.payload?.error !== null || env.payload?.result?.echoed?.text !== 'x') return null;
    return env.correlation ?? null;
  } catch {
    return null;
  }
}

async function dealerLatency(socketPath: string): Promise<{ stats: Stats; errors: number }> {
  const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
  d.connect(`ipc://${socketPath}`);
  const samples: number[] = [];
  let errors = 0;
  try {
    for (let i = 0; i < DEALER_WARMUP + DEALER_N; i++) {
      const correlation = `lat-${i}`;
      const t0 = performance.now();
      await d.send(request(correlation));
      const [frame] = await d.receive();
      const ms = performance.now() - t0;
      if (i < DEALER_WARMUP) continue;
      samples.push(ms);
      if (replyOk(frame, correlation) === null) errors++;
    }
  } finally {
    d.close();
  }
  return { stats: stats(samples), errors };
}

/** One request per fresh DEALER (create, connect, send, receive, close): connection set-up without process start. */
async function freshConnectionLatency(socketPath: string, n: number, warmup: number): Promise<{ stats: Stats; errors: number }> {
  const samples: number[] = [];
  let errors = 0;
  for (let i = 0; i < warmup + n; i++) {
    const correlation = `fresh-${i}`;
    const t0 = performance.now();
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
    try {
      d.connect(`ipc://${socketPath}`);
      await d.send(request(correlation));
      const [frame] = await d.receive();
      const ms = performance.now() - t0;
      if (i < warmup) continue;
      samples.push(ms);
      if (replyOk(frame, correlation) === null) errors++;
    } catch {
      if (i >= warmup) errors++;
    } finally {
      d.close();
    }
  }
  return { stats: stats(samples), errors };
}

interface LoadResult {
  clients: number;
  depth: number;
  seconds: number;
  completed: number;
  reqPerSec: number;
  errors: number;
  latency: Stats;
  /** `plugins`: the plugin host's plugin processes (a tree whose plugins ran inside the host has none). */
  cpuSeconds: { core: number; host: number; plugins: number; driver: number };
  cpuUsPerReq: { core: number; host: number; plugins: number; driver: number };
  machine: MachineLoad;
  rss: RssPeak;
}

interface RssPeak {
  corePeakMb: number;
  hostPeakMb: number;
  coreHwmMb: number;
}

/** Samples RSS every 100 ms until stopped; returns the peaks. */
function rssSampler(ready: Ready): { stop: () => RssPeak } {
  let core = 0;
  let host = 0;
  const sample = (): void => {
    core = Math.max(core, procStatus(ready.pid)?.rssMb ?? 0);
    host = Math.max(host, procStatus(ready.hostPid)?.rssMb ?? 0);
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return { corePeakMb: core, hostPeakMb: host, coreHwmMb: procStatus(ready.pid)?.hwmMb ?? NaN };
    },
  };
}

async function dealerLoad(ready: Ready, clients: number, depth: number, durationMs: number): Promise<LoadResult> {
  let stopAt = Infinity;
  let completed = 0;
  let errors = 0;
  const latencies: number[] = [];
  const startedAt = { t: 0 };

  const client = async (idx: number): Promise<void> => {
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000, sendHighWaterMark: 10_000 });
    d.connect(`ipc://${ready.sessions[idx % ready.sessions.length].socketPath}`);
    const pending = new Map<string, number>();
    let seq = 0;
    const send = async (): Promise<void> => {
      const correlation = `c${idx}-${seq++}`;
      pending.set(correlation, performance.now());
      await d.send(request(correlation));
    };
    try {
      for (let k = 0; k < depth; k++) await send();
      while (pending.size > 0) {
        let frame: Buffer;
        try {
          [frame] = await d.receive();
        } catch {
          errors += pending.size; // timed out: every request still in flight is a failure
          return;
        }
        const now = performance.now();
        const correlation = replyOk(frame, null);
        const sentAt = correlation === null ? undefined : pending.get(correlation);
        if (correlation === null || sentAt === undefined) {
          errors++;
          // we cannot tell which request this answered; drop the oldest to stay bounded
          const oldest = pending.keys().next().value;
          if (oldest !== undefined) pending.delete(oldest);
        } else {
          pending.delete(correlation);
          if (now >= startedAt.t && now < stopAt) {
            completed++;
            latencies.push(now - sentAt);
          }
        }
        if (now < stopAt) await send();
      }
    } finally {
      d.close();
    }
  };

  const cpu0 = { core: procCpu(ready.pid), host: procCpu(ready.hostPid), plugins: childrenCpu(ready.hostPid), driver: driverCpu() };
  const m0 = machineCpu();
  const rss = rssSampler(ready);
  startedAt.t = performance.now();
  stopAt = startedAt.t + durationMs;
  const runs = Array.from({ length: clients }, (_, i) => client(i));
  await Promise.all(runs);
  const seconds = (Math.min(performance.now(), stopAt) - startedAt.t) / 1000;
  const cpuSeconds = {
    core: r3(procCpu(ready.pid) - cpu0.core),
    host: r3(procCpu(ready.hostPid) - cpu0.host),
    plugins: r3(childrenDelta(cpu0.plugins, childrenCpu(ready.hostPid))),
    driver: r3(driverCpu() - cpu0.driver),
  };
  const machine = machineDelta(m0, cpuSeconds.core + cpuSeconds.host + cpuSeconds.plugins + cpuSeconds.driver);
  const per = (s: number): number => r2((s * 1e6) / Math.max(1, completed));
  return {
    clients,
    depth,
    seconds: r3(seconds),
    completed,
    reqPerSec: Math.round(completed / seconds),
    errors,
    latency: stats(latencies),
    cpuSeconds,
    cpuUsPerReq: { core: per(cpuSeconds.core), host: per(cpuSeconds.host), plugins: per(cpuSeconds.plugins), driver: per(cpuSeconds.driver) },
    machine,
    rss: rss.stop(),
  };
}

interface IpcLoadResult {
  cmd: string;
  loops: number;
  seconds: number;
  completed: number;
  callsPerSec: number;
  errors: number;
  cpuSeconds: { core: number; host: number };
  machine: MachineLoad;
  rss: RssPeak;
}

async function ipcLoad(ready: Ready, l: Launcher, durationMs: number): Promise<IpcLoadResult> {
  const cpu0 = { core: procCpu(ready.pid), host: procCpu(ready.hostPid) };
  const m0 = machineCpu();
  const rss = rssSampler(ready);
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: IPC_LOOPS }, (_, i) => {
      const env = bashEnv(ready.sessions[i % ready.sessions.length].socketPath);
      return runBash(PAR_LOOP, [l.cmd, String(durationMs * 1000), TOPIC, ARGS_JSON], env);
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  let completed = 0;
  let errors = 0;
  let rate = 0;
  let seconds = 0;
  for (const text of results) {
    const [n, fails, us] = text.trim().split(' ').map(Number);
    completed += n;
    errors += fails;
    rate += n / (us / 1e6); // each loop over its own window
    seconds = Math.max(seconds, us / 1e6);
  }
  const cpuSeconds = { core: r3(procCpu(ready.pid) - cpu0.core), host: r3(procCpu(ready.hostPid) - cpu0.host) };
  return {
    cmd: l.name,
    loops: IPC_LOOPS,
    seconds: r3(Math.min(seconds, wall)),
    completed,
    callsPerSec: Math.round(rate),
    errors,
    cpuSeconds,
    machine: machineDelta(m0, cpuSeconds.core + cpuSeconds.host),
    rss: rss.stop(),
  };
}

const ipcEnv = (socketPath: string): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  CARAPACE_IPC_ENDPOINT: `ipc://${socketPath}`,
  CARAPACE_IPC_TIMEOUT_MS: '10000',
});
const bashEnv = (socketPath: string): NodeJS.ProcessEnv => ({ ...ipcEnv(socketPath), LC_ALL: 'C' });

// ---- main ------------------------------------------------------------------------------

async function main(): Promise<void> {
  const benchStart = performance.now();
  const cpus = os.cpus();
  const machine = {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    totalMemGb: r2(os.totalmem() / 1024 ** 3),
    node: process.version,
    kernel: os.release(),
    platform: `${os.platform()} ${os.arch()}`,
    loadavg: os.loadavg().map(r2),
  };
  const summary: Record<string, unknown> = { machine, targets: TARGET };

  out('Carapace benchmark');
  out('==================');
  out(`CPU        ${machine.cpu} × ${machine.cores} cores`);
  out(`Memory     ${machine.totalMemGb} GB`);
  out(`Node       ${machine.node}`);
  out(`Kernel     ${machine.kernel} (${machine.platform}), load average ${machine.loadavg.join(' ')}`);
  if (!existsSync(IPC_BIN)) throw new Error(`${IPC_BIN} is missing: run make build`);
  if (!existsSync(CORE_PROCESS)) throw new Error(`${CORE_PROCESS} is missing: run make build`);
  if (PROFILE_DIR) out(`Profiling  core and plugin host under --cpu-prof → ${PROFILE_DIR}`);
  out();

  // d (idle): start the core, measure its memory before anything else touches it.
  const handle = await startCore();
  const { ready } = handle;
  let stoppingCore = false;
  handle.child.once('exit', (code, signal) => {
    if (stoppingCore) return;
    process.stderr.write(`bench failed: core-process died mid-run (code ${code}, signal ${signal})\n`);
    emergencyCleanup();
    process.exit(1);
  });
  const rssStart = procStatus(ready.pid);
  await sleep(1000);
  const rssSettled = procStatus(ready.pid);
  const hostIdle = procStatus(ready.hostPid);
  const memIdle = await coreMem(handle);
  out(`Core up in ${ready.startupMs} ms (pid ${ready.pid}, plugin host pid ${ready.hostPid}, ${ready.sessions.length} sessions, echo healthy)`);
  out('Memory (VmRSS)');
  out(`  core idle, at ready        ${rssStart?.rssMb} MB   [target ≤ ${TARGET.idleRssMb} MB: ${mark((rssStart?.rssMb ?? Infinity) <= TARGET.idleRssMb)}]`);
  out(`  core idle, after 1 s       ${rssSettled?.rssMb} MB   [target ≤ ${TARGET.idleRssMb} MB: ${mark((rssSettled?.rssMb ?? Infinity) <= TARGET.idleRssMb)}]`);
  out(`  core breakdown, idle       ${fmtMem(memIdle?.mem)}`);
  out(`  plugin host idle           ${hostIdle?.rssMb} MB`);
  out();
  summary.startupMs = ready.startupMs;
  summary.rss = { coreAtReadyMb: rssStart?.rssMb, coreSettledMb: rssSettled?.rssMb, hostIdleMb: hostIdle?.rssMb, coreIdleBreakdown: memIdle?.mem };

  const socketPath = ready.sessions[0].socketPath;

  // a. ipc end to end, with baselines.
  if (PHASES.has('ipc')) {
    const rustNoop = buildRustNoop(ready.dir);
    const launchers: Launcher[] = [{ name: 'true', cmd: TRUE_BIN }];
    if (rustNoop) launchers.push({ name: 'rust-noop', cmd: rustNoop });
    // The ipc binary itself, stopped by a usage error before any I/O: its own start-up cost.
    launchers.push({ name: 'ipc-usage', cmd: IPC_BIN, args: ['usage-error'], expect: 2 });
    launchers.push({ name: 'ipc', cmd: IPC_BIN });
    const label: Record<string, string> = {
      true: `${TRUE_BIN} (baseline)`,
      'rust-noop': 'static Rust no-op (baseline)',
      'ipc-usage': 'ipc, usage error (no I/O)',
      ipc: 'ipc tool.invoke.echo',
    };

    out(`a. ipc end to end: process start → pipeline → echo handler → stdout`);
    out(`   ${SPAWN_N} sequential calls after ${SPAWN_WARMUP} warm-up, launchers interleaved${rustNoop ? '' : ' (Rust no-op baseline unavailable: rustc failed)'}`);
    out(`   via Node child_process.spawn (spawn() → 'close'):`);
    const viaNode = await nodeSpawnSeries(launchers, ipcEnv(socketPath));
    for (const l of launchers) out(`     ${label[l.name].padEnd(30)} ${fmtStats(viaNode[l.name].stats)}  errors ${viaNode[l.name].errors}`);
    outIpcVsBaselines(launchers, viaNode);
    out(`     ${latencyTargets(viaNode.ipc.stats)} (ipc via Node spawn)`);

    out(`   via a bash loop (fork+exec, each call timed with $EPOCHREALTIME; also whole loop ÷ n):`);
    const viaBash: Record<string, { stats: Stats; errors: number; perCallMs: number }> = {};
    for (const l of launchers) {
      viaBash[l.name] = await bashSeries(l, bashEnv(socketPath));
      out(`     ${label[l.name].padEnd(30)} ${fmtStats(viaBash[l.name].stats)}  whole-loop ${viaBash[l.name].perCallMs.toFixed(3)} ms/call  errors ${viaBash[l.name].errors}`);
    }
    outIpcVsBaselines(launchers, viaBash);
    out(`     ${latencyTargets(viaBash.ipc.stats)} (ipc via bash loop)`);
    out();
    summary.ipcSequential = { nodeSpawn: viaNode, bashLoop: viaBash };
  }

  // b. pipeline latency without process start.
  if (PHASES.has('dealer') || PHASES.has('latency')) {
    out(`b. Pipeline round trip without process start: one DEALER, one request at a time`);
    const lat = await dealerLatency(socketPath);
    out(`   ${DEALER_N} requests after ${DEALER_WARMUP} warm-up: ${fmtStats(lat.stats)}  errors ${lat.errors}`);
    out(`   ${latencyTargets(lat.stats)}`);
    const fresh = await freshConnectionLatency(socketPath, SPAWN_N, SPAWN_WARMUP);
    out(`   new DEALER per request (connect + ZMTP handshake + round trip, no process start):`);
    out(`   ${SPAWN_N} requests after ${SPAWN_WARMUP} warm-up: ${fmtStats(fresh.stats)}  errors ${fresh.errors}`);
    out();
    summary.dealerLatency = lat;
    summary.freshConnectionLatency = fresh;
  }

  // c. throughput with concurrent DEALER clients.
  const loads: LoadResult[] = [];
  if (PHASES.has('throughput')) {
    out(`c. Throughput of validated, audited requests (raw DEALER clients over ${ready.sessions.length} sessions, ${DURATION_MS / 1000} s each)`);
    await dealerLoad(ready, 8, 1, 1000); // warm-up, not reported
    for (const [clients, depth] of [
      [8, 1],
      [32, 1],
      [32, 4],
    ] as const) {
      const r = await dealerLoad(ready, clients, depth, DURATION_MS);
      loads.push(r);
      out(`   ${String(clients).padStart(2)} clients × ${depth} in flight: ${String(r.reqPerSec).padStart(6)} req/s  [target ≥ ${TARGET.reqPerSec}: ${mark(r.reqPerSec >= TARGET.reqPerSec)}]  errors ${r.errors}  (${r.completed} in ${r.seconds} s)`);
      out(`      latency ${fmtStats(r.latency)}`);
      out(`      CPU per request: core ${r.cpuUsPerReq.core} µs, plugin host ${r.cpuUsPerReq.host} µs, its plugin processes ${r.cpuUsPerReq.plugins} µs, driver ${r.cpuUsPerReq.driver} µs  (CPU-s core ${r.cpuSeconds.core}, host ${r.cpuSeconds.host}, plugins ${r.cpuSeconds.plugins}, driver ${r.cpuSeconds.driver} of ${r.seconds} s × ${machine.cores} cores)`);
      out(`      machine: ${r.machine.busy} CPU-s busy of ${r2(r.seconds * machine.cores)} available, of which ${r.machine.others} by other processes; steal ${r.machine.steal} s`);
      out(`      RSS peak (100 ms samples): core ${r.rss.corePeakMb} MB, plugin host ${r.rss.hostPeakMb} MB`);
    }
    out();
    summary.throughput = loads;
  }

  // c. throughput with concurrent ipc processes.
  if (PHASES.has('ipcload')) {
    out(`c. Throughput with ${IPC_LOOPS} concurrent bash loops launching processes (${DURATION_MS / 1000} s each)`);
    const ipcRun = await ipcLoad(ready, { name: 'ipc', cmd: IPC_BIN }, DURATION_MS);
    out(`   ipc:        ${ipcRun.callsPerSec} calls/s  errors ${ipcRun.errors}  (${ipcRun.completed} calls; CPU-s core ${ipcRun.cpuSeconds.core}, host ${ipcRun.cpuSeconds.host}, bash+ipc+others ${ipcRun.machine.others} of ${ipcRun.machine.busy} busy; core RSS peak ${ipcRun.rss.corePeakMb} MB)`);
    const trueRun = await ipcLoad(ready, { name: 'true', cmd: TRUE_BIN }, Math.min(DURATION_MS, 2000));
    out(`   ${TRUE_BIN}: ${trueRun.callsPerSec} calls/s  (baseline: the machine's process-launch ceiling with the same loops)`);
    out();
    summary.ipcLoad = { ipc: ipcRun, baselineTrue: trueRun };
  }

  // d (load): peak memory.
  const hwm = procStatus(ready.pid)?.hwmMb;
  const memAfter = await coreMem(handle);
  const memRetained = await coreMem(handle, true);
  const hostAfter = procStatus(ready.hostPid);
  const peaks = [...loads.map((l) => l.rss.corePeakMb), ...((summary.ipcLoad as { ipc: IpcLoadResult } | undefined) ? [(summary.ipcLoad as { ipc: IpcLoadResult }).ipc.rss.corePeakMb] : [])];
  const corePeak = peaks.length ? Math.max(...peaks) : NaN;
  out('Memory under load (VmRSS)');
  out(`  core peak, sampled every 100 ms   ${corePeak} MB   (kernel high-water mark VmHWM ${hwm} MB)`);
  out(`  core now                          ${procStatus(ready.pid)?.rssMb} MB;  plugin host now ${hostAfter?.rssMb} MB (VmHWM ${hostAfter?.hwmMb} MB)`);
  out(`  core breakdown now                ${fmtMem(memAfter?.mem)}; ${memAfter?.auditRecorded ?? '?'} audit entries recorded`);
  out(`  core after a forced full GC       ${fmtMem(memRetained?.mem)}; RSS ${memRetained?.mem.rssMb} MB`);
  out();
  summary.rss = { ...(summary.rss as object), corePeakUnderLoadMb: corePeak, coreHwmMb: hwm, hostAfterMb: hostAfter?.rssMb, hostHwmMb: hostAfter?.hwmMb, coreAfterBreakdown: memAfter?.mem, coreAfterGc: memRetained?.mem, auditRecorded: memAfter?.auditRecorded };

  stoppingCore = true;
  const stopped = await stopCore(handle);
  out(`Core stopped ${stopped.clean ? 'cleanly' : 'UNCLEANLY'} in ${stopped.ms} ms. Total bench time ${((performance.now() - benchStart) / 1000).toFixed(1)} s.`);
  if (PROFILE_DIR) out(`Profiles: ${PROFILE_DIR}/core.cpuprofile, ${PROFILE_DIR}/host.cpuprofile (node dist/bench/profile-summary.js <file>)`);
  summary.shutdown = stopped;
  summary.totalSeconds = r2((performance.now() - benchStart) / 1000);

  const errors =
    Object.values((summary.ipcSequential as { nodeSpawn: Record<string, { errors: number }> } | undefined)?.nodeSpawn ?? {}).reduce((a, r) => a + r.errors, 0) +
    Object.values((summary.ipcSequential as { bashLoop: Record<string, { errors: number }> } | undefined)?.bashLoop ?? {}).reduce((a, r) => a + r.errors, 0) +
    ((summary.dealerLatency as { errors: number } | undefined)?.errors ?? 0) +
    ((summary.freshConnectionLatency as { errors: number } | undefined)?.errors ?? 0) +
    loads.reduce((a, l) => a + l.errors, 0) +
    ((summary.ipcLoad as { ipc: IpcLoadResult } | undefined)?.ipc.errors ?? 0);
  summary.errors = errors;
  if (errors > 0) out(`WARNING: ${errors} request(s) failed during the bench`);
  out(JSON.stringify(summary));
  if (errors > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${String((err as Error)?.stack ?? err)}\n`);
  emergencyCleanup();
  process.exit(1);
});
