// What one process per plugin costs (`make bench`). A real core (bench/core-process.ts, its
// own process) and the real plugin host, which starts each plugin in a process of its own:
//   a. a tool call that goes to a plugin (echo: core → plugin host → echo's process → back)
//      against an intrinsic that stays in the core (get_session_info), same run, alternated
//      on one connection: latency, then throughput, and their ratios (the plugin hop);
//      and against the same echo inside the plugin host's own process (bench/single-host.ts,
//      the host's shape before one process per plugin), same run;
//   b. RSS of the plugin host and of each plugin process, next to an idle bare Node
//      process; start-up from the host's spawn to every plugin initialized (as the core
//      sees it), next to a bare Node start, for 1 plugin (echo) and for 6 (echo and five
//      copies of plugins/_template, plain JavaScript).
// Human-readable results, then one JSON summary line (the last line of output).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as zmq from 'zeromq';
import { newPlugin } from '../core/src/plugins/new-plugin.js';
import { stats, type Stats } from './stats.js';
import { childrenOf, rssMb } from './proc.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CORE_PROCESS = join(ROOT, 'dist/bench/core-process.js');
/** The baseline: the same host with every plugin inside its own process (as before one process per plugin). */
const SINGLE_HOST = join(ROOT, 'dist/bench/single-host.js');
const PLUGIN_COUNTS = [1, 6];
/** Start-ups per plugin count (the median is reported). */
const STARTS = Number(process.env.BENCH_STARTS ?? 3);
const WARMUP = 300;
const N = Number(process.env.BENCH_N ?? 3000);
const LOAD_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
const LOAD_CLIENTS = 4;
const LOAD_DEPTH = 4;

const PLUGIN_CALL = { topic: 'tool.invoke.echo', args: '{"text":"x"}' };
const CORE_CALL = { topic: 'tool.invoke.get_session_info', args: '{}' };

const out = (line = ''): void => void process.stdout.write(`${line}\n`);
const r1 = (x: number): number => Math.round(x * 10) / 10;
const r2 = (x: number): number => Math.round(x * 100) / 100;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

// ---- processes ---------------------------------------------------------------------------

function uidOf(pid: number): number {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** Each plugin process's name (through its own uid when the host runs as root, else "plugin <n>") and RSS. */
function pluginProcesses(hostPid: number, dir: string): { name: string; pid: number; rssMb: number }[] {
  const uidsFile = join(dir, 'data/plugins/.uids.json');
  const byUid = new Map<number, string>(existsSync(uidsFile) ? Object.entries(JSON.parse(readFileSync(uidsFile, 'utf8')) as Record<string, number>).map(([n, u]) => [u, n]) : []);
  return childrenOf(hostPid)
    .sort((a, b) => a - b)
    .map((pid, i) => ({ name: byUid.get(uidOf(pid)) ?? `plugin ${i + 1}`, pid, rssMb: r1(rssMb(pid)) }));
}

/** Baselines: an idle bare Node process's RSS, and a bare Node start to exit. */
async function nodeBaseline(): Promise<{ idleRssMb: number; startMs: number }> {
  const idle = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(1000);
  const idleRssMb = r1(rssMb(idle.pid!));
  idle.kill('SIGKILL');
  const times: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    times.push(performance.now() - t0);
  }
  return { idleRssMb, startMs: r1(median(times)) };
}

// ---- the core under test ---------------------------------------------------------------

interface Ready {
  sessions: { id: string; socketPath: string }[];
  pid: number;
  hostPid: number;
  dir: string;
  startupMs: number;
  plugins: string[];
  pluginsReadyMs: number;
}

async function startCore(extraPluginsDir: string | null, hostMain?: string): Promise<{ child: ChildProcess; ready: Ready }> {
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_WATCH_STDIN: '1', ...(extraPluginsDir ? { BENCH_EXTRA_PLUGINS_DIR: extraPluginsDir } : {}), ...(hostMain ? { BENCH_HOST_MAIN: hostMain } : {}) };
  const child = spawn(process.execPath, [CORE_PROCESS, '2'], { stdio: ['pipe', 'pipe', 'inherit'], env });
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Ready>((resolveReady, rejectReady) => {
    const timer = setTimeout(() => rejectReady(new Error('core-process did not report ready within 60 s')), 60_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolveReady(JSON.parse(line) as Ready);
    });
    child.once('exit', (code) => rejectReady(new Error(`core-process exited before ready (code ${code})`)));
  }).catch((err: unknown) => {
    child.kill('SIGTERM');
    throw err;
  });
  return { child, ready };
}

async function stopCore(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

// ---- a: latency and throughput -----------------------------------------------------------

const frame = (call: { topic: string; args: string }, correlation: string): Buffer => Buffer.from(`{"topic":"${call.topic}","correlation":"${correlation}","arguments":${call.args}}`);

function answered(reply: Buffer, correlation: string | null): string | null {
  try {
    const env = JSON.parse(reply.toString('utf8')) as { correlation?: string; payload?: { error?: unknown; result?: unknown } };
    if (env.payload?.error !== null || env.payload?.result === undefined) return null;
    if (correlation !== null && env.correlation !== correlation) return null;
    return env.correlation ?? null;
  } catch {
    return null;
  }
}

/** One request at a time on one connection, the plugin call and the core call alternated. */
async function latency(socketPath: string): Promise<{ plugin: Stats; core: Stats; errors: number }> {
  const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
  d.connect(`ipc://${socketPath}`);
  const samples = { plugin: [] as number[], core: [] as number[] };
  let errors = 0;
  try {
    for (let i = 0; i < 2 * (WARMUP + N); i++) {
      const which = i % 2 === 0 ? 'plugin' : 'core';
      const correlation = `lat-${i}`;
      const t0 = performance.now();
      await d.send(frame(which === 'plugin' ? PLUGIN_CALL : CORE_CALL, correlation));
      const [reply] = await d.receive();
      const ms = performance.now() - t0;
      if (i < 2 * WARMUP) continue;
      samples[which].push(ms);
      if (answered(reply, correlation) === null) errors++;
    }
  } finally {
    d.close();
  }
  return { plugin: stats(samples.plugin), core: stats(samples.core), errors };
}

/** LOAD_CLIENTS connections, LOAD_DEPTH requests in flight each, for LOAD_MS: requests per second. */
async function throughput(sessions: Ready['sessions'], call: { topic: string; args: string }): Promise<{ reqPerSec: number; errors: number; latency: Stats }> {
  const stopAt = performance.now() + LOAD_MS;
  let completed = 0;
  let errors = 0;
  const latencies: number[] = [];
  const client = async (idx: number): Promise<void> => {
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
    d.connect(`ipc://${sessions[idx % sessions.length].socketPath}`);
    const pending = new Map<string, number>();
    let seq = 0;
    const send = async (): Promise<void> => {
      const correlation = `t${idx}-${seq++}`;
      pending.set(correlation, performance.now());
      await d.send(frame(call, correlation));
    };
    try {
      for (let k = 0; k < LOAD_DEPTH; k++) await send();
      while (pending.size > 0) {
        const [reply] = await d.receive();
        const now = performance.now();
        const correlation = answered(reply, null);
        const sentAt = correlation === null ? undefined : pending.get(correlation);
        if (correlation === null || sentAt === undefined) {
          errors++;
          const oldest = pending.keys().next().value;
          if (oldest !== undefined) pending.delete(oldest);
        } else {
          pending.delete(correlation);
          if (now < stopAt) {
            completed++;
            latencies.push(now - sentAt);
          }
        }
        if (now < stopAt) await send();
      }
    } catch {
      errors++;
    } finally {
      d.close();
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: LOAD_CLIENTS }, (_, i) => client(i)));
  const seconds = (Math.min(performance.now(), stopAt) - t0) / 1000;
  return { reqPerSec: Math.round(completed / seconds), errors, latency: stats(latencies) };
}

// ---- main --------------------------------------------------------------------------------

/** A folder of `count - 1` copies of the template (echo is always there): the extra plugins. */
function templateCopies(count: number): string | null {
  if (count <= 1) return null;
  const dir = mkdtempSync(join(os.tmpdir(), 'cp-bench-plugins-'));
  // Plugin processes run as uids of their own when this runs as root: they must read it.
  chmodSync(dir, 0o755);
  for (let i = 2; i <= count; i++) {
    const made = newPlugin(`bench${i}`, dir);
    if (!made.ok) throw new Error(`template copy bench${i}: ${made.message}`);
  }
  return dir;
}

async function main(): Promise<void> {
  const cpus = os.cpus();
  const machine = { cpu: cpus[0]?.model ?? 'unknown', cores: cpus.length, node: process.version, kernel: os.release(), loadavg: os.loadavg().map(r2) };
  if (!existsSync(CORE_PROCESS)) throw new Error(`${CORE_PROCESS} is missing: run make build`);
  out('Carapace benchmark: one process per plugin');
  out('==========================================');
  out(`CPU ${machine.cpu} × ${machine.cores} cores, Node ${machine.node}, load average ${machine.loadavg.join(' ')}`);
  const baseline = await nodeBaseline();
  out(`Baselines: a bare idle Node process ${baseline.idleRssMb} MB RSS; a bare Node start to exit ${baseline.startMs} ms (median of 10)`);
  out();

  const summary: Record<string, unknown> = { bench: 'plugin-processes', machine, baseline };
  // The baseline first: echo inside the plugin host's own process.
  const single = await startCore(null, SINGLE_HOST);
  let inHost: { latency: Awaited<ReturnType<typeof latency>>; load: Awaited<ReturnType<typeof throughput>>; hostMb: number };
  try {
    await sleep(1000);
    inHost = { latency: await latency(single.ready.sessions[0].socketPath), load: await throughput(single.ready.sessions, PLUGIN_CALL), hostMb: r1(rssMb(single.ready.hostPid)) };
  } finally {
    await stopCore(single.child);
  }
  const byCount: Record<string, unknown> = {};
  for (const count of PLUGIN_COUNTS) {
    const extra = templateCopies(count);
    const readyTimes: number[] = [];
    let memory: { hostMb: number; plugins: { name: string; rssMb: number }[]; pluginsTotalMb: number } | null = null;
    try {
      for (let run = 0; run < STARTS; run++) {
        const { child, ready } = await startCore(extra);
        try {
          readyTimes.push(ready.pluginsReadyMs);
          if (run > 0) continue;
          await sleep(1000); // settled, as bench/run.ts measures idle RSS
          const plugins = pluginProcesses(ready.hostPid, ready.dir);
          memory = { hostMb: r1(rssMb(ready.hostPid)), plugins: plugins.map(({ name, rssMb: mb }) => ({ name, rssMb: mb })), pluginsTotalMb: r1(plugins.reduce((a, p) => a + p.rssMb, 0)) };
          if (count === 1) {
            const lat = await latency(ready.sessions[0].socketPath);
            const loadPlugin = await throughput(ready.sessions, PLUGIN_CALL);
            const loadCore = await throughput(ready.sessions, CORE_CALL);
            const ratio = (a: number, b: number): number => r2(a / b);
            out(`a. The plugin hop (${N} calls each, alternated on one connection; then ${LOAD_CLIENTS} connections × ${LOAD_DEPTH} in flight for ${LOAD_MS / 1000} s each)`);
            out(`   echo (plugin process)       p50 ${lat.plugin.p50.toFixed(3)} ms  p99 ${lat.plugin.p99.toFixed(3)} ms  mean ${lat.plugin.mean.toFixed(3)} ms   ${loadPlugin.reqPerSec} req/s`);
            out(`   get_session_info (in core)  p50 ${lat.core.p50.toFixed(3)} ms  p99 ${lat.core.p99.toFixed(3)} ms  mean ${lat.core.mean.toFixed(3)} ms   ${loadCore.reqPerSec} req/s`);
            out(`   plugin / core: latency p50 ${ratio(lat.plugin.p50, lat.core.p50)}×, p99 ${ratio(lat.plugin.p99, lat.core.p99)}×; the hop adds ${(lat.plugin.p50 - lat.core.p50).toFixed(3)} ms at p50; throughput ${ratio(loadPlugin.reqPerSec, loadCore.reqPerSec)}×`);
            out(`   errors: ${lat.errors + loadPlugin.errors + loadCore.errors}`);
            const base = inHost.latency.plugin;
            out(`   baseline, echo inside the plugin host (its shape before one process per plugin): p50 ${base.p50.toFixed(3)} ms  p99 ${base.p99.toFixed(3)} ms   ${inHost.load.reqPerSec} req/s; host with echo ${inHost.hostMb} MB RSS`);
            out(`   own process / inside the host: latency p50 ${ratio(lat.plugin.p50, base.p50)}×, p99 ${ratio(lat.plugin.p99, base.p99)}×; throughput ${ratio(loadPlugin.reqPerSec, inHost.load.reqPerSec)}×`);
            out();
            summary.singleHost = { latency: base, reqPerSec: inHost.load.reqPerSec, hostMb: inHost.hostMb, p50Ratio: ratio(lat.plugin.p50, base.p50), p99Ratio: ratio(lat.plugin.p99, base.p99), throughputRatio: ratio(loadPlugin.reqPerSec, inHost.load.reqPerSec) };
            summary.hop = {
              latency: { plugin: lat.plugin, core: lat.core, p50Ratio: ratio(lat.plugin.p50, lat.core.p50), p99Ratio: ratio(lat.plugin.p99, lat.core.p99), addedP50Ms: r2(lat.plugin.p50 - lat.core.p50) },
              throughput: { pluginReqPerSec: loadPlugin.reqPerSec, coreReqPerSec: loadCore.reqPerSec, ratio: ratio(loadPlugin.reqPerSec, loadCore.reqPerSec), pluginP50Ms: loadPlugin.latency.p50, coreP50Ms: loadCore.latency.p50 },
              errors: lat.errors + loadPlugin.errors + loadCore.errors,
            };
          }
        } finally {
          await stopCore(child);
        }
      }
    } finally {
      if (extra) rmSync(extra, { recursive: true, force: true });
    }
    const startMs = median(readyTimes);
    out(`b. ${count} plugin${count > 1 ? 's' : ''}${count > 1 ? ` (echo + ${count - 1} template copies)` : ' (echo)'}`);
    out(`   start-up, host spawn → all initialized: median ${startMs} ms of ${readyTimes.join(', ')} ms   (a bare Node start: ${baseline.startMs} ms)`);
    if (memory) {
      out(`   RSS plugin host alone ${memory.hostMb} MB; plugin processes ${memory.plugins.map((p) => `${p.name} ${p.rssMb}`).join(', ')} MB`);
      out(`   RSS total ${r1(memory.hostMb + memory.pluginsTotalMb)} MB = host + ${memory.plugins.length} × ${r1(memory.pluginsTotalMb / Math.max(1, memory.plugins.length))} MB on average   (a bare idle Node: ${baseline.idleRssMb} MB)`);
    }
    out();
    byCount[String(count)] = { pluginsReadyMs: startMs, pluginsReadyRunsMs: readyTimes, rss: memory };
  }
  summary.plugins = byCount;
  out(JSON.stringify(summary));
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
