// API mode on a real Docker engine with the real agent image and the real Claude Code
// CLI: the container has no network (as in legacy mode) and serves agent-image/api-server.mjs
// on a unix socket in its session directory; the core runs every turn as an authenticated
// POST /v1/run over it. The model is the Anthropic stand-in behind the core's LLM proxy,
// Telegram the Bot API stand-in. Attacks on the network boundary are in
// api-mode-isolation.test.ts. Needs `make images`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { AgentSpec, AttachedAgent } from '../../src/agents/runtime.js';
import { AGENT_IMAGE, newAgentManager, sh } from '../support/agents.js';
import { expectLockedDown, expectMounts } from '../support/hardening.js';
import {
  apologySince,
  expectHungAgentKilled,
  expectModelSawMessage,
  expectPipelineTrail,
  expectWarmContainerReused,
  HUNG_RUN_TIMEOUT_MS,
  lastAgentError,
  REPLY,
  runAgentsOnEvents,
  sendUserMessage,
  startMilkScenario,
  type MilkScenario,
} from '../support/milk-scenario.js';

const MODEL_KEY = 'sk-ant-api03-apimode-model-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAApiModeTestTokenForTheTelegramStandIn';
const CHAT = 1002;
const DOCKER = process.env.DOCKER || 'docker';

/** The Docker runtime, recording what the manager asked of it. */
class WatchedRuntime extends DockerRuntime {
  readonly specs: AgentSpec[] = [];
  attached = 0;
  override async start(spec: AgentSpec): Promise<string> {
    this.specs.push(spec);
    return super.start(spec);
  }
  override async startAttached(spec: AgentSpec): Promise<AttachedAgent> {
    this.attached++;
    return super.startAttached(spec);
  }
}

let scenario: MilkScenario;
let runtime: WatchedRuntime;
let manager: AgentManager;
let runs: Promise<unknown>[] = [];

/** An API-mode manager; `agents` adds to (or overrides) its settings. */
function newManager(rt: DockerRuntime, instance: string, agents: Record<string, unknown> = {}): AgentManager {
  return newAgentManager(scenario.stack, { upstream: scenario.modelUrl, apiKey: MODEL_KEY, agents: { mode: 'api', run_timeout_ms: 120_000, ...agents }, instance, runtime: rt });
}

function docker(args: string[]): string {
  return execFileSync(DOCKER, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function apiDirOf(spec: AgentSpec | undefined): string {
  const mount = spec?.mounts.find((m) => m.target === '/run/api');
  if (!mount) throw new Error('no /run/api mount');
  return mount.source;
}

/** The server's unix socket as the core sees it: api.sock in the directory mounted at /run/api. */
async function socketOf(container: string): Promise<string> {
  const info = await runtime.inspect(container);
  const mount = info.Mounts.find((m) => m.Destination === '/run/api');
  if (!mount) throw new Error('no /run/api mount');
  return join(mount.Source, 'api.sock');
}

/** One HTTP request over the server's unix socket; resolves with the status code. */
function call(socketPath: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: options.method ?? 'GET', headers: options.headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The bearer token, as the server process holds it (the only place it lives in the container). */
async function tokenFromServer(container: string): Promise<string> {
  const r = await sh(runtime, container, `for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q api-server.mjs; then tr '\\0' '\\n' < $p/environ | sed -n 's/^API_KEY=//p'; fi; done`);
  const token = r.out.trim().split('\n')[0] ?? '';
  expect(token).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  return token;
}

beforeAll(async () => {
  scenario = await startMilkScenario(CHAT, BOT_TOKEN);
  runtime = new WatchedRuntime();
  manager = newManager(runtime, `api-${process.pid}`);
  await manager.removeOrphans();
}, 60_000);

afterAll(async () => {
  await manager?.stop();
  await scenario?.stop();
}, 60_000);

describe('API mode, end to end', () => {
  it('"remind me to buy milk at 5pm" → agent over HTTP → ipc → plugin → send_telegram → Telegram', async () => {
    runs = runAgentsOnEvents(scenario.stack, manager);
    const reply = await sendUserMessage(scenario.telegram, CHAT);
    expect(reply.text).toBe(REPLY);
    const [outcome] = (await Promise.all(runs)) as { ok: boolean; output: string }[];
    expect(outcome).toEqual({ ok: true, output: 'Replied to the user.' });

    // The turn went through the HTTP API: the core never attached to Claude Code itself.
    expect(runtime.attached).toBe(0);
    expect(runtime.specs.at(-1)?.cmd).toEqual(['api']);

    expectModelSawMessage(scenario.model, MODEL_KEY);

    expectPipelineTrail(await scenario.stack.auditEntries(), 'family');
  }, 180_000);

  it('a second message reuses the warm container', async () => {
    await expectWarmContainerReused(scenario, manager, runs);
    expect(runtime.specs).toHaveLength(1);
  }, 180_000);
});

describe('API mode container (docker inspect)', () => {
  it('has no network, as in legacy mode, and serves on a unix socket in its /run/api directory', async () => {
    const container = manager.live('family')!.container;
    const info = await runtime.inspect(container);
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect((info.Config as { NetworkDisabled?: boolean }).NetworkDisabled).toBe(true);
    expect(info.HostConfig.PortBindings ?? {}).toEqual({});
    expect(info.Config.ExposedPorts ?? {}).toEqual({});
    const socket = await socketOf(container);
    expect(socket).toBe(join(apiDirOf(runtime.specs[0]), 'api.sock'));
    const stat = lstatSync(socket);
    expect(stat.isSocket()).toBe(true);
    // The agent's user owns it; no one else on the host may connect (the core is root or that user).
    expect(stat.uid).toBe(1000);
    expect(stat.mode & 0o777).toBe(0o600);
  });

  it('is hardened exactly like legacy mode', async () => {
    const info = await runtime.inspect(manager.live('family')!.container);
    expectLockedDown(info);
    expectMounts(info, { '/run/api': true });
  });

  it('shows no bearer token and no model key: not in Env, Labels, Cmd, nor anywhere in docker inspect', async () => {
    const container = manager.live('family')!.container;
    const token = await tokenFromServer(container);
    const info = await runtime.inspect(container);
    const everything = JSON.stringify(info);
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(MODEL_KEY);
    expect(everything).not.toMatch(/sk-ant-/);
    expect(info.Config.Env.some((e) => e.startsWith('API_KEY='))).toBe(false);
    const cli = docker(['inspect', container]);
    expect(cli).not.toContain(token);
    expect(JSON.stringify(runtime.specs)).not.toContain(token);
  });

  it('the token file is gone from the mounted directory once the server runs: only its socket is there', async () => {
    const container = manager.live('family')!.container;
    const dir = apiDirOf(runtime.specs[0]);
    const info = await runtime.inspect(container);
    expect(info.Mounts.find((m) => m.Destination === '/run/api')?.Source).toBe(dir);
    expect(dir).toMatch(/\/carapace-api-[0-9a-f-]{36}$/);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir)).toEqual(['api.sock']);
    expect((await sh(runtime, container, 'ls -A /run/api')).out.trim()).toBe('api.sock');
  });

  it('only the server process holds the token: not Claude Code', async () => {
    const container = manager.live('family')!.container;
    const r = await sh(runtime, container, `for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); [ -n "$c" ] || continue; if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -q '^API_KEY='; then echo "HAS $c"; else echo "NO $c"; fi; done`);
    const lines = r.out.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('HAS ')).every((l) => l.includes('api-server.mjs'))).toBe(true);
    expect(lines.some((l) => l.startsWith('HAS ') && l.includes('api-server.mjs'))).toBe(true);
    expect(lines.some((l) => l.startsWith('NO ') && /claude/.test(l))).toBe(true);
  });
});

describe('API mode authentication', () => {
  it('answers /health without a token and refuses everything else without the right one', async () => {
    const container = manager.live('family')!.container;
    const socket = await socketOf(container);
    const token = await tokenFromServer(container);
    expect(await call(socket, '/health')).toBe(200);
    const run = (headers: Record<string, string>) => call(socket, '/v1/run', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ prompt: 'hi' }) });
    const before = scenario.model.requests.length;
    expect(await run({})).toBe(401);
    expect(await run({ authorization: 'Bearer 00000000-0000-4000-8000-000000000000' })).toBe(401);
    expect(await run({ authorization: `Bearer ${token}x` })).toBe(401);
    expect(await run({ authorization: token })).toBe(401);
    expect(await run({ authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` })).toBe(401);
    expect(await call(socket, '/anything')).toBe(401);
    // No turn ran: the model saw nothing.
    expect(scenario.model.requests.length).toBe(before);
    // With the token: past the gate (an unknown route, a malformed body), still no turn.
    expect(await call(socket, '/anything', { headers: { authorization: `Bearer ${token}` } })).toBe(404);
    const malformed = await call(socket, '/v1/run', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ prompt: 'x', extra: 1 }) });
    expect(malformed).toBe(400);
    expect(scenario.model.requests.length).toBe(before);
  }, 60_000);

  it('finds the model key nowhere inside: env, process environments, readable files', async () => {
    const container = manager.live('family')!.container;
    const r = await sh(runtime, container, `env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rs -l 'apimode-model-key' /home /run /workspace /tmp /etc 2>/dev/null; true`);
    expect(r.out).toContain('ANTHROPIC_UNIX_SOCKET=/run/carapace/llm.sock');
    expect(r.out).not.toContain(MODEL_KEY);
    expect(r.out).not.toContain('apimode-model-key');
    expect(r.out).not.toMatch(/sk-ant-/);
  });

  it('talks TCP only on loopback (it has nothing else)', async () => {
    // After two full turns: Claude Code reached the model over the LLM proxy's unix socket.
    const r = await sh(runtime, manager.live('family')!.container, 'cat /proc/net/tcp /proc/net/tcp6 2>/dev/null');
    const rows = r.out.trim().split('\n').filter((l) => /^\s*\d+:/.test(l)).map((l) => l.trim().split(/\s+/));
    const loopback = (addr: string) => /^[0-9A-F]{6}7F:/.test(addr) || /^0000000000000000FFFF0000[0-9A-F]{6}7F:/.test(addr) || /^0{24}01000000:/.test(addr) || /^0+:/.test(addr);
    const foreign = rows.filter(([, , remote]) => !loopback(remote));
    expect(foreign).toEqual([]);
  });
});

describe('API mode lifecycle', () => {
  it('retiring removes the container and the token directory', async () => {
    const live = manager.live('family')!;
    const dir = apiDirOf(runtime.specs[0]);
    expect(existsSync(dir)).toBe(true);
    await manager.retire('family');
    expect(manager.live('family')).toBeNull();
    expect(existsSync(dir)).toBe(false);
    await expect(runtime.inspect(live.container)).rejects.toMatchObject({ statusCode: 404 });
  }, 60_000);

  it('a symlink the agent plants in place of its socket is not followed: the core talks to no other socket', async () => {
    // A decoy on the host that the core could reach (as the Docker socket or another
    // session's socket would be): the agent points api.sock at it.
    const dir = mkdtempSync(join(tmpdir(), 'cp-api-decoy-'));
    const decoyPath = join(dir, 'decoy.sock');
    let connections = 0;
    const decoy = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((resolve) => decoy.listen(decoyPath, resolve));
    try {
      await manager.enqueue('family', 'start a new agent');
      const live = manager.live('family')!;
      const planted = await sh(runtime, live.container, `rm -f /run/api/api.sock; ln -s ${decoyPath} /run/api/api.sock && test -L /run/api/api.sock && echo planted`);
      expect(planted.out.trim()).toBe('planted');
      const outcome = await manager.enqueue('family', 'through the symlink');
      expect(outcome.ok).toBe(false);
      expect(outcome.output).toContain('is not a unix socket');
      expect(connections).toBe(0);
      expect(manager.live('family')).toBeNull();
    } finally {
      decoy.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('a server that never becomes healthy: container and token directory removed, agent.error', async () => {
    // The container is started with the legacy command while a token is mounted: the
    // entrypoint deletes the token and refuses to start.
    class Misstarted extends WatchedRuntime {
      override async start(spec: AgentSpec): Promise<string> {
        return super.start({ ...spec, cmd: ['idle'] });
      }
    }
    const broken = new Misstarted();
    const failing = newManager(broken, `api-broken-${process.pid}`);
    const sentBefore = scenario.telegram.sentTo(CHAT).length;
    try {
      const started = Date.now();
      await expect(failing.enqueue('family', 'never runs')).rejects.toThrow(/stopped before it was healthy/);
      expect(Date.now() - started).toBeLessThan(25_000);
      const dir = apiDirOf(broken.specs[0]);
      expect(existsSync(dir)).toBe(false);
      expect(await broken.listManaged(`api-broken-${process.pid}`)).toEqual([]);
      expect((await apologySince(scenario, sentBefore)).text).toContain('could not be started');
      expect(lastAgentError(scenario)?.reason).toBe('agent container failed to start');
    } finally {
      await failing.stop();
    }
  }, 60_000);

  it('a hung agent is killed after the run limit, its token directory removed, and the user told', async () => {
    const hungRuntime = new WatchedRuntime();
    const impatient = newManager(hungRuntime, `api-hung-${process.pid}`, { run_timeout_ms: HUNG_RUN_TIMEOUT_MS });
    // Longer than the run limit, short enough not to keep Jest waiting long afterwards.
    await expectHungAgentKilled(scenario, impatient, 15_000, async () => {
      expect(await hungRuntime.listManaged(`api-hung-${process.pid}`)).toEqual([]);
      expect(existsSync(apiDirOf(hungRuntime.specs[0]))).toBe(false);
    });
  }, 90_000);
});

describe('API mode entrypoint', () => {
  /** The agent image as the core runs it, but with no network and a chosen /run/api mount. */
  function runEntrypoint(mount: string, cmd: string[]): { status: number | null; stderr: string } {
    const r = spawnSync(DOCKER, ['run', '--rm', '--network', 'none', '--read-only', '--user', '1000:1000', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '-v', mount, AGENT_IMAGE, ...cmd], { encoding: 'utf8', timeout: 60_000 });
    return { status: r.status, stderr: r.stderr };
  }
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cp-api-entry-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function tokenFile(sub: string): string {
    mkdirSync(join(dir, sub), { mode: 0o700 });
    const file = join(dir, sub, '.api-key');
    writeFileSync(file, '11111111-2222-4333-8444-555555555555', { mode: 0o600 });
    if (process.getuid?.() === 0) {
      chownSync(file, 1000, 1000);
      chownSync(join(dir, sub), 1000, 1000);
    }
    return file;
  }

  it('refuses to start when the token file itself is bind-mounted (it cannot be deleted)', () => {
    const file = tokenFile('file');
    const r = runEntrypoint(`${file}:/run/api/.api-key`, ['api']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/cannot remove '\/run\/api\/.api-key'/);
  }, 60_000);

  it('refuses API mode without a token, and a token without API mode (deleting it either way)', () => {
    mkdirSync(join(dir, 'empty'), { mode: 0o777 });
    const missing = runEntrypoint(`${join(dir, 'empty')}:/run/api`, ['api']);
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stderr.trim().split('\n').at(-1)!)).toMatchObject({ code: 'API_KEY_MISSING' });

    const file = tokenFile('unexpected');
    const unexpected = runEntrypoint(`${join(dir, 'unexpected')}:/run/api`, ['idle']);
    expect(unexpected.status).toBe(1);
    expect(JSON.parse(unexpected.stderr.trim().split('\n').at(-1)!)).toMatchObject({ code: 'API_KEY_UNEXPECTED' });
    expect(existsSync(file)).toBe(false);
  }, 60_000);
});
