// A full disk under the audit log, for real: a small tmpfs is the audit directory of a
// real core process (bench/core-process.ts, with the admin API), driven through the
// real ipc binary. Filled, the core keeps answering: calls that would reach a handler get
// a structured retriable AUDIT_UNAVAILABLE, intrinsics and /health answer, /health says
// why. Freed, it recovers by itself. Filled again, SIGTERM still ends it promptly.
// Needs root (mount); skipped with a message otherwise.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseConfig } from '../../src/config.js';
import { Core } from '../../src/core.js';
import { freePort, IPC_BIN, ROOT, sleep, tryParse, until, type IpcResult } from '../harness.js';

const isRoot = process.getuid?.() === 0;
const maybe = isRoot ? describe : describe.skip;
if (!isRoot) process.stderr.write('audit-full-disk: skipped, mounting a tmpfs needs root\n');

let mountDir = '';
let core: ChildProcess | null = null;
let coreOut = '';
let socketPath = '';
let port = 0;
const filler = (): string => join(mountDir, 'filler');

beforeAll(async () => {
  if (!isRoot) return;
  mountDir = mkdtempSync(join(tmpdir(), 'cp-fulldisk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', mountDir]);
  port = await freePort();
  core = spawn(process.execPath, [join(ROOT, 'dist/bench/core-process.js'), '1'], {
    env: { PATH: process.env.PATH, BENCH_AUDIT_DIR: mountDir, BENCH_ADMIN_PORT: String(port), BENCH_AUDIT_RETRY_MS: '200' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  core.stderr?.on('data', (d: Buffer) => (coreOut += d.toString()));
  const lines = createInterface({ input: core.stdout! });
  const ready = await new Promise<{ sessions: { socketPath: string }[] }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`core did not start\n${coreOut}`)), 30_000);
    lines.on('line', (line) => {
      coreOut += `${line}\n`;
      const parsed = tryParse(line);
      if (parsed?.sessions) {
        clearTimeout(timer);
        resolve(parsed);
      }
    });
  });
  socketPath = ready.sessions[0].socketPath;
}, 40_000);

afterAll(async () => {
  if (!isRoot) return;
  if (core && core.exitCode === null && core.signalCode === null) core.kill('SIGKILL');
  await sleep(100);
  try {
    execFileSync('umount', ['-l', mountDir]);
  } catch {
    // not mounted
  }
  rmSync(mountDir, { recursive: true, force: true });
});

function ipc(topic: string, args: unknown): Promise<IpcResult> {
  return new Promise((resolve) => {
    execFile(IPC_BIN, [topic, JSON.stringify(args)], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${socketPath}`, CARAPACE_IPC_TIMEOUT_MS: '2000' } }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr, out: tryParse(stdout), err: tryParse(stderr) });
    });
  });
}

async function health(): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(3000) });
  return { status: res.status, body: await res.json() };
}

/** Fills the tmpfs to the last byte. */
function fill(): void {
  const chunk = Buffer.alloc(16 * 1024, 0x61);
  for (;;) {
    try {
      appendFileSync(filler(), chunk);
    } catch {
      break;
    }
  }
  for (;;) {
    try {
      appendFileSync(filler(), 'a');
    } catch {
      return;
    }
  }
}

/** Calls echo until `done` says so or the deadline passes; the last result. */
async function echoUntil(done: (r: IpcResult) => boolean, ms: number): Promise<IpcResult> {
  const deadline = Date.now() + ms;
  let r = await ipc('tool.invoke.echo', { text: 'probe' });
  while (!done(r) && Date.now() < deadline) {
    await sleep(100);
    r = await ipc('tool.invoke.echo', { text: 'probe' });
  }
  return r;
}

maybe('a full audit disk', () => {
  it('fails closed, keeps answering, says why, recovers by itself, and still exits on SIGTERM', async () => {
    expect((await ipc('tool.invoke.echo', { text: 'before' })).code).toBe(0);

    fill();
    // The first writes after the disk filled fail; from then on calls that would act are refused.
    const refused = await echoUntil((r) => r.err?.error?.code === 'AUDIT_UNAVAILABLE' || r.err?.code === 'AUDIT_UNAVAILABLE', 15_000);
    const error = refused.err?.error ?? refused.err;
    expect(error).toMatchObject({ code: 'AUDIT_UNAVAILABLE', retriable: true, stage: 6 });

    // The core itself still answers: an intrinsic, and /health, which says why.
    const info = await ipc('tool.invoke.get_session_info', {});
    expect(info.code).toBe(0);
    const down = await health();
    expect(down.status).toBe(503);
    expect(down.body.status).toBe('degraded');
    expect(down.body.audit.ok).toBe(false);
    expect(down.body.audit.last_error).toMatch(/ENOSPC/);
    expect(down.body.audit.failures).toBeGreaterThan(0);
    // The operator is told, once.
    expect(coreOut.split('audit log cannot be written').length - 1).toBe(1);

    // Space returns: it recovers by itself, and entries reach the file again.
    unlinkSync(filler());
    const ok = await echoUntil((r) => r.code === 0, 15_000);
    expect(ok.out?.echoed?.text ?? ok.out).toBeTruthy();
    expect(ok.code).toBe(0);
    const up = await health();
    expect(up.status).toBe(200);
    expect(up.body.audit.ok).toBe(true);
    expect(up.body.audit.lost_entries).toBeGreaterThan(0);
    // The answer can reach the agent a moment before its entry reaches the file (writes are batched).
    let lines: string[] = [];
    let recovered = -1;
    const answered = (): boolean => {
      lines = readFileSync(join(mountDir, 'audit.jsonl'), 'utf8').split('\n').filter(Boolean);
      recovered = lines.findIndex((l) => tryParse(l)?.reason?.startsWith('audit log writable again'));
      return recovered >= 0 && lines.slice(recovered).some((l) => { const e = tryParse(l); return e?.topic === 'tool.invoke.echo' && e?.stage === 'response' && e?.outcome === 'ok'; });
    };
    for (let i = 0; i < 50 && !answered(); i++) await sleep(100);
    expect(recovered).toBeGreaterThanOrEqual(0);
    const after = lines.slice(recovered).map((l) => JSON.parse(l));
    expect(after.some((e) => e.topic === 'tool.invoke.echo' && e.stage === 'response' && e.outcome === 'ok')).toBe(true);

    // Full again, with writes failing: SIGTERM ends the process promptly.
    fill();
    await echoUntil((r) => r.code !== 0, 10_000);
    const exited = new Promise<number | string | null>((resolve) => core!.once('exit', (code, signal) => resolve(code ?? signal)));
    core!.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([exited, new Promise((r) => (timer = setTimeout(() => r('still running 15 s after SIGTERM'), 15_000)))]);
    clearTimeout(timer);
    expect(result).toBe(0);
  }, 120_000);
});

maybe('the user is told', () => {
  it('once per outage, in each group with a live session, and once when it is over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-notify-'));
    const logs = join(dir, 'logs');
    mkdirSync(logs);
    mkdirSync(join(dir, 'plugins'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', logs]);
    const core = await Core.start({ runDir: join(dir, 'run'), pluginsDir: join(dir, 'plugins'), auditFile: join(logs, 'audit.jsonl'), config: parseConfig({}), auditRetryMs: 100 });
    const told: { group: string | null; text: string }[] = [];
    const publish = core.publish.bind(core);
    core.publish = (topic, group, payload, ...rest) => {
      if (topic === 'user.notify') told.push({ group, text: String(payload.text) });
      return publish(topic, group, payload, ...rest);
    };
    try {
      await core.openSession('family');
      await core.openSession('work');
      const big = join(logs, 'filler');
      const chunk = Buffer.alloc(4096, 0x61);
      for (;;) {
        try {
          appendFileSync(big, chunk);
        } catch {
          break;
        }
      }
      for (let i = 0; i < 50; i++) {
        core.audit.record({ group: 'family', session: null, source: 'test', topic: null, correlation: `n${i}`, stage: 'core', outcome: 'ok', reason: 'x'.repeat(200) });
        await sleep(5);
      }
      await until(() => !core.audit.writable, 5000);
      await sleep(300); // probes fail again meanwhile: still told once
      expect(told.map((t) => t.group).sort()).toEqual(['family', 'work']);
      expect(told[0].text).toMatch(/audit log cannot be written .*ENOSPC/);
      unlinkSync(big);
      await until(() => core.audit.writable, 5000);
      expect(told.length).toBe(4);
      expect(told[2].text).toMatch(/writable again/);
    } finally {
      await core.stop();
      execFileSync('umount', ['-l', logs]);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
