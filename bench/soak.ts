// The soak run (`make soak`): a real core in its own process (bench/core-process.ts, which
// spawns the real plugin host) under a steady, mixed load of real `ipc` processes for
// SOAK_MINUTES (default 10). Per minute it prints the RSS of the core and of the plugin
// host (the plugins run in it), and the p50/p99 of the calls; at the end the RSS slope
// (least squares, MB/min) and the latency drift (last minute's p50 / first minute's).
// A leak shows as a slope that does not flatten; a slowdown as a drift well above 1.
//
//   SOAK_MINUTES=1 node dist/bench/soak.js
import { execFile, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { rssMb } from './proc.js';
import { r3, slope, stats } from './stats.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const IPC_BIN = join(ROOT, 'dist/bin/ipc');
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const LOOPS = 4;
const PAUSE_MS = 20;
/** Valid calls, and the refusals an agent also causes: unknown tools and bad arguments. */
const MIX: [string, string][] = [
  ['tool.invoke.echo', '{"text":"soak"}'],
  ['tool.invoke.echo', `{"text":"${'x'.repeat(4000)}"}`],
  ['tool.invoke.get_session_info', '{}'],
  ['tool.invoke.no_such_tool', '{}'],
  ['tool.invoke.echo', '{"unexpected":1}'],
];

interface Ready {
  sessions: { id: string; socketPath: string }[];
  pid: number;
  hostPid: number | null;
  dir: string;
}

const out = (line = ''): void => void process.stdout.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function ipcCall(socketPath: string, topic: string, args: string): Promise<{ ms: number; ok: boolean }> {
  const t0 = performance.now();
  return new Promise((done) => {
    execFile(IPC_BIN, [topic, args], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${socketPath}`, CARAPACE_IPC_TIMEOUT_MS: '10000' } }, (err) =>
      done({ ms: performance.now() - t0, ok: !err }),
    );
  });
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, [join(ROOT, 'dist/bench/core-process.js'), String(LOOPS)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const ready = await new Promise<Ready>((ok, fail) => {
    createInterface({ input: child.stdout! }).once('line', (line) => ok(JSON.parse(line) as Ready));
    child.once('exit', (code) => fail(new Error(`core-process exited before ready (${code})`)));
  });
  out(`soak: ${MINUTES} min, ${LOOPS} loops of real ipc processes (${PAUSE_MS} ms apart), mix of ${MIX.length} calls incl. refusals`);
  out(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}`);
  out(`start: core RSS ${rssMb(ready.pid).toFixed(1)} MB, plugin host RSS ${rssMb(ready.hostPid).toFixed(1)} MB`);
  out('minute  calls refused   p50 ms   p99 ms   core MB  host MB');

  let stop = false;
  let samples: number[] = [];
  let errors = 0;
  let unexpected = 0;
  const loops = ready.sessions.map(async (session, i) => {
    for (let n = i; !stop; n++) {
      const [topic, args] = MIX[n % MIX.length];
      const r = await ipcCall(session.socketPath, topic, args);
      samples.push(r.ms);
      // Refusals are expected for the last two of the mix; anything else failing is not.
      const expectOk = n % MIX.length < 3;
      if (!r.ok) errors++;
      if (r.ok !== expectOk) unexpected++;
      await sleep(PAUSE_MS);
    }
  });

  const rows: { minute: number; p50: number; p99: number; core: number; host: number }[] = [];
  for (let minute = 1; minute <= MINUTES; minute++) {
    await sleep(60_000);
    const s = stats(samples);
    const row = { minute, p50: s.p50, p99: s.p99, core: rssMb(ready.pid), host: rssMb(ready.hostPid) };
    rows.push(row);
    out(`${String(minute).padStart(6)}  ${String(s.n).padStart(5)}  ${String(errors).padStart(6)}  ${s.p50.toFixed(2).padStart(7)}  ${s.p99.toFixed(2).padStart(7)}  ${row.core.toFixed(1).padStart(8)}  ${row.host.toFixed(1).padStart(7)}`);
    samples = [];
    errors = 0;
  }
  stop = true;
  await Promise.all(loops);
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  rmSync(ready.dir, { recursive: true, force: true });

  // The first minute includes warm-up (JIT, allocator growth): slopes are over the rest too.
  const after = rows.length > 2 ? rows.slice(1) : rows;
  const summary = {
    minutes: MINUTES,
    core_rss_slope_mb_per_min: r3(slope(rows.map((r) => [r.minute, r.core]))),
    core_rss_slope_after_minute_1: r3(slope(after.map((r) => [r.minute, r.core]))),
    host_rss_slope_mb_per_min: r3(slope(rows.map((r) => [r.minute, r.host]))),
    host_rss_slope_after_minute_1: r3(slope(after.map((r) => [r.minute, r.host]))),
    p50_drift_last_vs_first: r3(rows[rows.length - 1].p50 / rows[0].p50),
    p99_drift_last_vs_first: r3(rows[rows.length - 1].p99 / rows[0].p99),
    unexpected_outcomes: unexpected,
  };
  out(`core RSS slope ${summary.core_rss_slope_mb_per_min} MB/min (after minute 1: ${summary.core_rss_slope_after_minute_1}); plugin host ${summary.host_rss_slope_mb_per_min} MB/min (after minute 1: ${summary.host_rss_slope_after_minute_1})`);
  out(`latency drift, last minute / first: p50 ×${summary.p50_drift_last_vs_first}, p99 ×${summary.p99_drift_last_vs_first}; calls with an unexpected outcome: ${unexpected}`);
  out(JSON.stringify(summary));
}

main().catch((err: unknown) => {
  process.stderr.write(`soak: ${String(err)}\n`);
  process.exit(1);
});
