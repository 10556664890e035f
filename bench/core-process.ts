// Benchmark core: a real Core in its own process (so its RSS and CPU are its own), plus
// the real plugin host as a child process, serving the echo fixture plugin.
//
//   node dist/bench/core-process.js <sessions>
//
// Prints one JSON line on stdout once every plugin is healthy:
//   {"sessions":[{"id","socketPath"}...],"pid","hostPid","dir","startupMs","plugins","pluginsReadyMs"}
// Stops gracefully on SIGTERM/SIGINT, or (with BENCH_WATCH_STDIN=1) when stdin closes;
// then a stdin line "mem" (or "memgc": after a full GC) gets one JSON line of memory figures back.
// Extra node flags for the plugin host (e.g. --cpu-prof) come from BENCH_HOST_NODE_ARGS;
// another host entry (bench/single-host.js, the baseline of plugin-processes.js) from BENCH_HOST_MAIN.
// BENCH_EXTRA_PLUGINS_DIR: every folder in it is served too (bench/plugin-processes.ts);
// the ready line waits for all plugins and says how long they took from the host's spawn.
// BENCH_AUDIT_DIR puts the audit log elsewhere (a small tmpfs, a directory to measure),
// BENCH_AUDIT_REPEAT_WINDOW_S overrides the repeat window (0: no summaries, the audit
// bench's baseline), BENCH_AUDIT_RETRY_MS probes an unwritable audit log that often, BENCH_ADMIN_PORT also
// serves the admin API on 127.0.0.1, BENCH_CONFIG_JSON is merged into the configuration.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { getHeapStatistics } from 'node:v8';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { startAdminApi } from '../core/src/admin/http-api.js';
import { parseConfig } from '../core/src/config.js';
import { Core } from '../core/src/core.js';
import { FIXTURE_HANDLERS, FIXTURES, HOST_MAIN, pluginUidRange, sleep } from '../core/test/harness.js';

/**
 * High enough that the bench measures the pipeline, not the limiter; the session guard's
 * own defaults with BENCH_SESSION_DEFAULTS=1 (bench/session-guard-bench.ts).
 */
const RAW_CONFIG = {
  rate_limit: { per_minute: 100_000_000, burst: 1_000_000 },
  handler_timeout_ms: 10_000,
  shutdown_timeout_ms: 5_000,
  ...(process.env.BENCH_SESSION_DEFAULTS === '1'
    ? {}
    : { sessions: { requests_per_minute: 100_000_000, burst: 1_000_000, bytes_per_minute: 1e12, burst_bytes: 1e11, refusals_per_minute: 1_000_000, max_in_flight: 1024, max_connections: 1024, reply_high_water_mark: 1000 } }),
  ...(JSON.parse(process.env.BENCH_CONFIG_JSON || '{}') as Record<string, unknown>),
};

const log = (msg: string): void => void process.stderr.write(`[core-process] ${msg}\n`);

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? '8');
  if (!Number.isInteger(count) || count < 1 || count > 1024) throw new Error(`bad session count: ${process.argv[2]}`);
  const t0 = performance.now();

  const dir = mkdtempSync(join(tmpdir(), 'cp-bench-'));
  // Plugins run as uids of their own when this runs as root: they pass through to their data folders.
  chmodSync(dir, 0o711);
  const runDir = join(dir, 'run');
  const pluginsDir = join(dir, 'plugins');
  const configFile = join(dir, 'carapace.json');
  mkdirSync(runDir, { recursive: true });
  mkdirSync(pluginsDir, { recursive: true });
  symlinkSync(join(FIXTURES, 'echo'), join(pluginsDir, 'echo'));
  const extra = process.env.BENCH_EXTRA_PLUGINS_DIR;
  for (const name of extra ? readdirSync(extra) : []) symlinkSync(join(extra!, name), join(pluginsDir, name));
  writeFileSync(configFile, JSON.stringify(RAW_CONFIG));

  let core: Core | null = null;
  let admin: FastifyInstance | null = null;
  let host: ChildProcess | null = null;
  let hostOutput = '';
  let stopping: Promise<void> | null = null;

  const stop = (code: number): Promise<void> =>
    (stopping ??= (async () => {
      try {
        await admin?.close();
        await core?.stop();
      } catch (err) {
        log(`core.stop failed: ${String(err)}`);
      }
      const h = host;
      if (h && h.exitCode === null && h.signalCode === null) {
        const exited = new Promise((r) => h.once('exit', r));
        const timer = setTimeout(() => h.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
      process.exit(code);
    })());

  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));
  if (process.env.BENCH_WATCH_STDIN === '1') {
    // The driver holds our stdin: if it goes away without stopping us, stop anyway.
    // A line "mem" asks for this process's memory breakdown (one JSON line on stdout).
    const lines = createInterface({ input: process.stdin });
    lines.on('line', (line) => {
      const command = line.trim();
      if (command !== 'mem' && command !== 'memgc') return;
      // "memgc": after a full collection (needs --expose-gc), i.e. what is really retained.
      const gc = (globalThis as { gc?: () => void }).gc;
      if (command === 'memgc' && gc) gc();
      const heap = getHeapStatistics();
      const m = process.memoryUsage();
      const mb = (b: number): number => Math.round((b / 1024 / 1024) * 100) / 100;
      process.stdout.write(
        `${JSON.stringify({ mem: { rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed), heapTotalMb: mb(m.heapTotal), externalMb: mb(m.external), arrayBuffersMb: mb(m.arrayBuffers), heapLimitMb: mb(heap.heap_size_limit) }, auditRecorded: core?.audit.recorded ?? 0 })}\n`,
      );
    });
    lines.on('close', () => void stop(0));
    process.stdin.on('error', () => void stop(0));
  }

  try {
    const auditDir = process.env.BENCH_AUDIT_DIR || join(dir, 'logs');
    const auditRetryMs = process.env.BENCH_AUDIT_RETRY_MS ? Number(process.env.BENCH_AUDIT_RETRY_MS) : undefined;
    const config = parseConfig(RAW_CONFIG);
    // The audit bench's baseline: 0 writes every rejection whole (not a setting users have).
    if (process.env.BENCH_AUDIT_REPEAT_WINDOW_S) config.audit.repeat_window_s = Number(process.env.BENCH_AUDIT_REPEAT_WINDOW_S);
    core = await Core.start({ runDir, pluginsDir, auditFile: join(auditDir, 'audit.jsonl'), config, auditRetryMs });
    if (process.env.BENCH_ADMIN_PORT) admin = await startAdminApi(core, '127.0.0.1', Number(process.env.BENCH_ADMIN_PORT));
    const hostArgs = (process.env.BENCH_HOST_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const hostSpawnedAt = performance.now();
    host = spawn(process.execPath, [...hostArgs, process.env.BENCH_HOST_MAIN || HOST_MAIN], {
      env: {
        PATH: process.env.PATH,
        CARAPACE_RUN_DIR: runDir,
        CARAPACE_PLUGINS_DIR: pluginsDir,
        CARAPACE_HANDLERS_DIR: FIXTURE_HANDLERS,
        CARAPACE_CONFIG: configFile,
        CARAPACE_DATA_DIR: join(dir, 'data'),
        CARAPACE_LOG_DIR: join(dir, 'logs'),
        // As root each plugin's uid is swept whole when it ends: a range of its own, as the
        // tests' stacks have, so that a test or another bench running meanwhile (on the
        // default range) and this one do not end each other's plugins.
        CARAPACE_PLUGIN_FIRST_UID: String(pluginUidRange()),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer): void => void (hostOutput = (hostOutput + d.toString()).slice(-16_384));
    host.stdout?.on('data', keep);
    host.stderr?.on('data', keep);
    host.once('exit', (code, signal) => {
      if (!stopping) log(`plugin host exited unexpectedly (code ${code}, signal ${signal})\n${hostOutput}`);
    });

    const deadline = Date.now() + 20_000;
    const names = core.catalog.pluginNames();
    while (names.some((n) => core!.catalog.state(n) !== 'healthy')) {
      if (Date.now() > deadline) throw new Error(`plugins did not become healthy (${names.map((n) => `${n}=${core!.catalog.state(n)}`).join(' ')})\n${hostOutput}`);
      await sleep(2);
    }
    const pluginsReadyMs = Math.round((performance.now() - hostSpawnedAt) * 10) / 10;

    const sessions = [];
    for (let i = 0; i < count; i++) {
      const s = await core.openSession(`bench${i}`);
      sessions.push({ id: s.id, socketPath: s.socketPath });
    }
    const ready = { sessions, pid: process.pid, hostPid: host.pid ?? null, dir, startupMs: Math.round((performance.now() - t0) * 10) / 10, plugins: names, pluginsReadyMs };
    process.stdout.write(`${JSON.stringify(ready)}\n`);
  } catch (err) {
    log(`start failed: ${String((err as Error)?.stack ?? err)}`);
    await stop(1);
  }
}

main().catch((err: unknown) => {
  log(String((err as Error)?.stack ?? err));
  process.exit(1);
});
