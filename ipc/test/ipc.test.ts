// Interop tests: the real `ipc` binary (Rust) against a real libzmq ROUTER (the
// zeromq package the core uses). Build the binary first: `make ipc`.
import { describe, it, expect, beforeEach, afterEach } from '@jest/globals';
import * as zmq from 'zeromq';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

// Compiled to dist/ipc/test/, the binary lives at dist/bin/ipc.
const IPC_BIN =
  process.env['CARAPACE_IPC_BIN'] ?? resolve(dirname(fileURLToPath(import.meta.url)), '../../bin/ipc');

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

interface RunOptions {
  endpoint?: string;
  timeoutMs?: string;
  env?: Record<string, string>;
  stdin?: string;
}

let dir = '';
let endpoint = '';
let sockets: zmq.Router[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-ipc-'));
  endpoint = `ipc://${join(dir, 'core.sock')}`;
});

afterEach(() => {
  for (const s of sockets) if (!s.closed) s.close();
  sockets = [];
  rmSync(dir, { recursive: true, force: true });
});

function runIpc(args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['CARAPACE_IPC_ENDPOINT'];
  delete env['CARAPACE_IPC_TIMEOUT_MS'];
  env['CARAPACE_IPC_ENDPOINT'] = opts.endpoint ?? endpoint;
  env['CARAPACE_IPC_TIMEOUT_MS'] = opts.timeoutMs ?? '10000';
  Object.assign(env, opts.env);

  const started = Date.now();
  const child = spawn(IPC_BIN, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  child.stdin.on('error', () => {}); // ipc may exit before reading stdin
  child.stdin.end(opts.stdin ?? '');
  return new Promise((done, fail) => {
    child.on('error', fail);
    child.on('close', (code) =>
      done({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ms: Date.now() - started,
      }),
    );
  });
}

async function startRouter(options: Partial<zmq.Router> = {}): Promise<zmq.Router> {
  const router = new zmq.Router({ linger: 0, ...options });
  sockets.push(router);
  await router.bind(endpoint);
  return router;
}

interface Request {
  id: Buffer;
  frames: Buffer[];
  body: { topic: string; correlation: string; arguments: unknown };
}

async function receiveRequest(router: zmq.Router): Promise<Request> {
  const [id, ...frames] = await router.receive();
  return { id: id!, frames, body: JSON.parse(frames[frames.length - 1]!.toString('utf8')) };
}

// A response envelope as the core builds it.
function envelope(req: Request, payload: { result: unknown; error: unknown }, correlation?: string): string {
  return JSON.stringify({
    id: randomUUID(),
    version: 1,
    type: 'response',
    topic: req.body.topic,
    source: 'session-test',
    correlation: correlation ?? req.body.correlation,
    timestamp: new Date().toISOString(),
    group: 'test-group',
    payload,
  });
}

// Each failure is exactly one line of JSON on stderr, never a panic message or trace.
function parseFailure(r: RunResult): { code: string; message: string; retriable: boolean } {
  expect(r.stderr).not.toMatch(/panic|backtrace/);
  expect(r.stderr.endsWith('\n')).toBe(true);
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  return JSON.parse(r.stderr);
}

describe('ipc binary against a libzmq ROUTER', () => {
  it('round trip: sends one frame {topic, correlation, arguments} and prints the result', async () => {
    const router = await startRouter();
    // Exact bytes matter: a big integer and a trailing zero must survive untouched.
    const args = '{"title":"Buy milk","n":12345678901234567890,"x":2.50,"nested":{"a":[1,true,null,"é"]}}';
    const run = runIpc(['tool.invoke.create_reminder', args]);

    const req = await receiveRequest(router);
    expect(req.frames).toHaveLength(1);
    expect(Object.keys(req.body).sort()).toEqual(['arguments', 'correlation', 'topic']);
    expect(req.body.topic).toBe('tool.invoke.create_reminder');
    expect(req.body.correlation).toMatch(UUID_V4);
    expect(req.frames[0]!.toString('utf8').endsWith(`"arguments":${args}}`)).toBe(true);

    const result = { reminder_id: 'r-1', due: '17:00', n: 3 };
    await router.send([req.id, envelope(req, { result, error: null })]);
    const r = await run;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(JSON.stringify(result) + '\n');
  });

  it('accepts a reply that starts with an empty delimiter frame', async () => {
    const router = await startRouter();
    const run = runIpc(['tool.invoke.echo', '{"a":1}']);
    const req = await receiveRequest(router);
    await router.send([req.id, Buffer.alloc(0), envelope(req, { result: ['ok', 1], error: null })]);
    const r = await run;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('["ok",1]\n');
  });

  it('prints an error reply on stderr and exits 1', async () => {
    const router = await startRouter();
    const run = runIpc(['tool.invoke.create_reminder', '{}']);
    const req = await receiveRequest(router);
    const error = { code: 'HANDLER_ERROR', message: 'boom <&>', retriable: false, details: { step: 2 } };
    await router.send([req.id, envelope(req, { result: null, error })]);
    const r = await run;
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(JSON.stringify(error) + '\n');
  });

  it('ignores a reply with a stale correlation and takes the matching one', async () => {
    const router = await startRouter();
    const run = runIpc(['tool.invoke.echo', '{}']);
    const req = await receiveRequest(router);
    await router.send([req.id, envelope(req, { result: 'stale', error: null }, randomUUID())]);
    await router.send([req.id, 'not json at all']);
    await router.send([req.id, envelope(req, { result: 'fresh', error: null })]);
    const r = await run;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('"fresh"\n');
  });

  it('answers heartbeat PINGs while the core is slow to reply', async () => {
    // Without PONGs libzmq drops the connection 200 ms after each PING, so a
    // 1 s handler would only ever be reached through resends (and then fail).
    const router = await startRouter({ heartbeatInterval: 50, heartbeatTimeout: 200, heartbeatTimeToLive: 300 });
    const run = runIpc(['tool.invoke.slow', '{}']);
    const req = await receiveRequest(router);
    await sleep(1000);
    await router.send([req.id, envelope(req, { result: 'late but fine', error: null })]);
    const r = await run;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('"late but fine"\n');
    // The first connection survived: no resend reached the router.
    router.receiveTimeout = 100;
    await expect(router.receive()).rejects.toThrow();
  });

  it('resends the same request after the core restarts', async () => {
    const first = await startRouter();
    const run = runIpc(['tool.invoke.echo', '{"k":"v"}']);
    const req1 = await receiveRequest(first);
    first.close();
    // libzmq leaves the dead socket file behind, so until the new router binds
    // (replacing it) ipc gets "connection refused" and backs off.
    await sleep(100);

    const second = await startRouter();
    const req2 = await receiveRequest(second);
    expect(req2.frames).toHaveLength(1);
    expect(req2.body.correlation).toBe(req1.body.correlation);
    expect(req2.frames[0]!.equals(req1.frames[0]!)).toBe(true);
    await second.send([req2.id, envelope(req2, { result: { echoed: true }, error: null })]);
    const r = await run;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('{"echoed":true}\n');
  });

  it('times out with IPC_TIMEOUT when no core is listening', async () => {
    const r = await runIpc(['tool.invoke.echo', '{}'], { timeoutMs: '300' });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    // The message gives the time it actually waited: the 300 ms deadline, or a little more on a loaded machine.
    const failure = parseFailure(r);
    expect(failure).toEqual({ code: 'IPC_TIMEOUT', message: expect.stringMatching(/^No response from core within \d+ ms$/), retriable: true });
    const waited = Number(/within (\d+) ms/.exec(String(failure.message))?.[1]);
    expect(waited).toBeGreaterThanOrEqual(300);
    expect(waited).toBeLessThan(2000);
    expect(r.ms).toBeGreaterThanOrEqual(290);
    expect(r.ms).toBeLessThan(2000);
  });

  describe('usage errors exit 2 with one line of JSON', () => {
    const cases: Array<[string, string[], RunOptions, string]> = [
      ['no arguments', [], {}, 'IPC_USAGE'],
      ['topic only', ['tool.invoke.echo'], {}, 'IPC_USAGE'],
      ['too many arguments', ['t', '{}', 'extra'], {}, 'IPC_USAGE'],
      ['empty topic', ['', '{}'], {}, 'IPC_USAGE'],
      ['non-printable topic', ['tool\ninvoke', '{}'], {}, 'IPC_USAGE'],
      ['overlong topic', ['t'.repeat(257), '{}'], {}, 'IPC_USAGE'],
      ['array arguments', ['t', '[1]'], {}, 'IPC_INVALID_JSON'],
      ['string arguments', ['t', '"x"'], {}, 'IPC_INVALID_JSON'],
      ['invalid JSON', ['t', '{"password":"hunter2",'], {}, 'IPC_INVALID_JSON'],
      ['trailing garbage', ['t', '{} {}'], {}, 'IPC_INVALID_JSON'],
      ['empty arguments', ['t', ''], {}, 'IPC_INVALID_JSON'],
      ['tcp endpoint', ['t', '{}'], { endpoint: 'tcp://127.0.0.1:5555' }, 'IPC_USAGE'],
      ['bare path endpoint', ['t', '{}'], { endpoint: '/run/carapace/carapace.sock' }, 'IPC_USAGE'],
      ['non-numeric timeout', ['t', '{}'], { timeoutMs: 'soon' }, 'IPC_USAGE'],
      ['zero timeout', ['t', '{}'], { timeoutMs: '0' }, 'IPC_USAGE'],
      ['negative timeout', ['t', '{}'], { timeoutMs: '-5' }, 'IPC_USAGE'],
    ];
    it.each(cases)('%s', async (_name, args, opts, code) => {
      const r = await runIpc(args, opts);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      const failure = parseFailure(r);
      expect(failure.code).toBe(code);
      expect(failure.retriable).toBe(false);
      expect(typeof failure.message).toBe('string');
      expect(r.stderr).not.toContain('hunter2'); // never echo the arguments
    });

    it('prints the usage line', async () => {
      expect(parseFailure(await runIpc([]))).toEqual({
        code: 'IPC_USAGE',
        message: 'usage: ipc <topic> <json-object|->',
        retriable: false,
      });
    });
  });

  describe('stdin mode', () => {
    it('reads a 600 KiB argument object from stdin', async () => {
      const router = await startRouter();
      const blob = 'x'.repeat(600 * 1024);
      const run = runIpc(['tool.invoke.store', '-'], { stdin: JSON.stringify({ blob }) + '\n' });
      const req = await receiveRequest(router);
      expect(req.frames).toHaveLength(1);
      expect(req.body.arguments).toEqual({ blob });
      await router.send([req.id, envelope(req, { result: { stored: blob.length }, error: null })]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`{"stored":${blob.length}}\n`);
    });

    it('refuses a 1.1 MiB request with REQUEST_TOO_LARGE before connecting', async () => {
      const blob = 'x'.repeat(Math.round(1.1 * 1024 * 1024));
      const r = await runIpc(['tool.invoke.store', '-'], { stdin: JSON.stringify({ blob }) });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      const failure = parseFailure(r);
      expect(failure.code).toBe('REQUEST_TOO_LARGE');
      expect(failure.retriable).toBe(false);
    });
  });

  it('prints a ~1 MB result intact', async () => {
    const router = await startRouter();
    const result = { data: 'é'.repeat(250_000) + 'y'.repeat(500_000), n: 1e21, list: [1, 2, 3] };
    const run = runIpc(['tool.invoke.big', '{}']);
    const req = await receiveRequest(router);
    const reply = envelope(req, { result, error: null });
    expect(Buffer.byteLength(reply)).toBeGreaterThan(1_000_000);
    await router.send([req.id, reply]);
    const r = await run;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(JSON.stringify(result) + '\n');
  });
});
