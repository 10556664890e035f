// Audit bytes under a flood of rejections (`make bench`): one session of a real core
// process (bench/core-process.ts) is flooded over raw ZeroMQ with unknown topics, bad
// JSON and schema failures, each with its own topic and correlation, as a hostile agent
// would. Measured: bytes the core wrote to its audit directory per second (its own count,
// /health's audit.written_bytes, which rotation does not hide; and the directory's size),
// first with summaries off (the old behaviour, the baseline), then as shipped.
//
//   AUDIT_FLOOD_S=60   seconds of flood per run (default 60)
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as zmq from 'zeromq';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CORE_PROCESS = join(ROOT, 'dist/bench/core-process.js');
const SECONDS = Number(process.env.AUDIT_FLOOD_S ?? 60);
const IN_FLIGHT = 64;
const GOAL_KB_S = 50;

const out = (line = ''): void => void process.stdout.write(`${line}\n`);

interface Run {
  requests: number;
  writtenBytes: number;
  dirBytes: number;
  seconds: number;
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => res(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

const dirSize = (dir: string): number => readdirSync(dir).reduce((sum, n) => sum + statSync(join(dir, n)).size, 0);

function message(i: number): string {
  switch (i % 3) {
    case 0:
      return JSON.stringify({ topic: `tool.invoke.nope${i}`, correlation: `u-${i}`, arguments: {} });
    case 1:
      return `{"topic":"tool.invoke.x${i}","correlation":"j-${i}",`;
    default:
      return JSON.stringify({ topic: 'tool.invoke.echo', correlation: `s-${i}`, arguments: { text: i } });
  }
}

async function flood(windowS: number | null): Promise<Run> {
  const auditDir = mkdtempSync(join(tmpdir(), 'cp-audit-bench-'));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, BENCH_AUDIT_DIR: auditDir, BENCH_ADMIN_PORT: String(port), BENCH_WATCH_STDIN: '1' };
  if (windowS !== null) env.BENCH_AUDIT_REPEAT_WINDOW_S = String(windowS);
  const core = spawn(process.execPath, [CORE_PROCESS, '1'], { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: core.stdout! });
  const ready = await new Promise<{ sessions: { socketPath: string }[] }>((res, rej) => {
    lines.on('line', (l) => {
      try {
        const parsed = JSON.parse(l) as { sessions?: { socketPath: string }[] };
        if (parsed.sessions) res(parsed as { sessions: { socketPath: string }[] });
      } catch {
        // a log line
      }
    });
    core.once('exit', () => rej(new Error('core process exited before it was ready')));
  });
  const health = async (): Promise<{ written_bytes: number }> =>
    ((await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { audit: { written_bytes: number } }).audit;

  const dealer = new zmq.Dealer({ linger: 0, sendHighWaterMark: 100_000, receiveHighWaterMark: 100_000 });
  dealer.connect(`ipc://${ready.sessions[0].socketPath}`);
  const before = (await health()).written_bytes;
  const dirBefore = dirSize(auditDir);
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  let sent = 0;
  let received = 0;
  const receiving = (async () => {
    while (received < sent || performance.now() < end) {
      await dealer.receive();
      received++;
    }
  })();
  while (performance.now() < end) {
    while (sent - received < IN_FLIGHT) await dealer.send(message(sent++));
    await new Promise((r) => setImmediate(r));
  }
  await receiving;
  const seconds = (performance.now() - t0) / 1000;
  // What the flood wrote, including the summaries its windows close with afterwards.
  await new Promise((r) => setTimeout(r, ((windowS ?? 10) + 1.5) * 1000));
  const written = (await health()).written_bytes - before;
  const dirBytes = dirSize(auditDir) - dirBefore;
  dealer.close();
  const exited = new Promise((r) => core.once('exit', r));
  core.kill('SIGTERM');
  await exited;
  rmSync(auditDir, { recursive: true, force: true });
  return { requests: received, writtenBytes: written, dirBytes, seconds };
}

async function main(): Promise<void> {
  out(`audit bytes under a flood of rejections from one session (${SECONDS} s each; unknown topics, bad JSON, schema failures)`);
  const baseline = await flood(0);
  const shipped = await flood(null);
  const kbs = (r: Run): number => r.writtenBytes / 1024 / r.seconds;
  const line = (name: string, r: Run): string =>
    `  ${name.padEnd(14)} ${String(Math.round(r.requests / r.seconds)).padStart(7)} req/s  ${kbs(r).toFixed(1).padStart(9)} KB/s written  (${(r.writtenBytes / 1024 / 1024).toFixed(1)} MB in ${r.seconds.toFixed(1)} s; directory grew ${(r.dirBytes / 1024 / 1024).toFixed(1)} MB)`;
  out(line('un-summarised', baseline));
  out(line('summarised', shipped));
  const perReq = (r: Run): number => r.writtenBytes / Math.max(1, r.requests);
  out(`  bytes per rejected request: ${perReq(baseline).toFixed(0)} → ${perReq(shipped).toFixed(2)} (ratio ${(perReq(baseline) / Math.max(perReq(shipped), 1e-9)).toFixed(0)}×)`);
  out(`  [goal ≤ ${GOAL_KB_S} KB/s: ${kbs(shipped) <= GOAL_KB_S ? 'MET' : 'MISSED'}]`);
  out(JSON.stringify({ audit_flood: { seconds: SECONDS, baseline: { ...baseline, kb_per_s: kbs(baseline) }, summarised: { ...shipped, kb_per_s: kbs(shipped) } } }));
}

main().catch((err: unknown) => {
  process.stderr.write(`${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
