// The doctor: its checks against real things (the model stand-in's key check, the real
// Docker engine, a real core with real plugin failures), the admin API route, and the
// CLI's words and exit codes.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import type { FastifyInstance } from 'fastify';
import Docker from 'dockerode';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { unclaimedBytes } from '../../src/agents/workspace-claims.js';
import { startAdminApi } from '../../src/admin/http-api.js';
import { runChecks, type Check, type DoctorDeps } from '../../src/doctor/checks.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { ROOT, Stack } from '../harness.js';

const KEY = 'sk-ant-doctor-test-key-0123456789';
const ADMIN = 'doctor-admin-token-0123456789';
let model: AnthropicStandIn;
let modelUrl: string;
let silent: Server;
const held: Socket[] = [];
let silentUrl: string;
let stack: Stack;
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const PRESENT_IMAGE = 'node:22-bookworm-slim';

beforeAll(async () => {
  model = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  model.modelKey = KEY;
  modelUrl = await model.start();
  // A server that takes the connection and never answers.
  silent = createServer((socket) => held.push(socket));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  stack = await Stack.start({ plugins: ['echo', 'authfail'], extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') }, env: { TELEGRAM_BOT_TOKEN: '' }, config: { plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}' } } } });
});

afterAll(async () => {
  await stack?.stop();
  await model?.stop();
  for (const socket of held) socket.destroy();
  silent?.close();
});

function deps(over: Partial<DoctorDeps> = {}): DoctorDeps {
  return {
    model: { upstream: modelUrl, credential: { apiKey: KEY } },
    docker: { ping: () => docker.ping(), hasImage: (name) => docker.getImage(name).inspect().then(() => true) },
    agentImage: PRESENT_IMAGE,
    plugins: () => stack.core.catalog.states(),
    audit: () => stack.core.audit.health(),
    folders: [{ name: 'data', path: stack.dir }],
    timeoutMs: 2000,
    ...over,
  };
}
const find = (checks: Check[], id: string) => checks.find((c) => c.id === id)!;

describe('doctor checks', () => {
  it('a good key, the engine and the image are ok', async () => {
    const { checks } = await runChecks(deps());
    expect(find(checks, 'model-key')).toMatchObject({ status: 'ok' });
    expect(find(checks, 'docker').status).toBe('ok');
    expect(find(checks, 'agent-image').status).toBe('ok');
    expect(model.requests.some((r) => r.method === 'GET' && r.path === '/v1/models' && r.headers['x-api-key'] === KEY)).toBe(true);
  });

  it('a refused key, no key, and an unreachable or silent model server each fail with a fix', async () => {
    const wrong = find((await runChecks(deps({ model: { upstream: modelUrl, credential: { apiKey: 'sk-ant-wrong' } } }))).checks, 'model-key');
    expect(wrong).toMatchObject({ status: 'fail', detail: expect.stringContaining('refuses the key (HTTP 401)'), fix: expect.stringContaining('.env') });
    const none = find((await runChecks(deps({ model: { upstream: modelUrl, credential: {} } }))).checks, 'model-key');
    expect(none).toMatchObject({ status: 'fail', fix: expect.stringContaining('ANTHROPIC_API_KEY') });
    const unreachable = find((await runChecks(deps({ model: { upstream: 'http://127.0.0.1:1', credential: { apiKey: KEY } } }))).checks, 'model-key');
    expect(unreachable).toMatchObject({ status: 'fail', detail: expect.stringContaining('Cannot reach 127.0.0.1:1') });
    const started = Date.now();
    const hung = await runChecks(deps({ model: { upstream: silentUrl, credential: { apiKey: KEY } } }));
    expect(Date.now() - started).toBeLessThan(10_000); // bounded by timeoutMs, not by the server
    expect(find(hung.checks, 'model-key').status).toBe('fail');
    expect(find(hung.checks, 'docker').status).toBe('ok'); // the others still ran
    expect(hung.ok).toBe(false);
  });

  it('a missing agent image and an unreachable engine fail with a fix', async () => {
    const image = find((await runChecks(deps({ agentImage: 'carapace-agent:no-such-tag' }))).checks, 'agent-image');
    expect(image).toMatchObject({ status: 'fail', fix: expect.stringContaining('make images') });
    const gone = new Docker({ socketPath: '/nonexistent/docker.sock' });
    const engine = find((await runChecks(deps({ docker: { ping: () => gone.ping(), hasImage: async () => true } }))).checks, 'docker');
    expect(engine).toMatchObject({ status: 'fail', fix: expect.stringContaining('docker.sock') });
  });

  it('reports plugins: a refused credential fails, one without its token is only "not set up"', async () => {
    const report = await runChecks(deps());
    expect(find(report.checks, 'plugin-echo').status).toBe('ok');
    // What failed and why, in its own words, with the key it carried redacted; and what to do.
    expect(find(report.checks, 'plugin-authfail')).toEqual({
      id: 'plugin-authfail',
      title: 'Plugin authfail',
      status: 'fail',
      detail: 'Failed to start (AUTH_ERROR): Error: 401 Unauthorized from https://api.example/ with key [REDACTED].',
      fix: expect.stringMatching(/^its server refused the credentials: check them in \.env; edit \.env, then run `docker compose up -d`/),
    });
    expect(find(report.checks, 'plugin-telegram')).toMatchObject({ status: 'warn', fix: expect.stringContaining('TELEGRAM_BOT_TOKEN') });
    expect(report.ok).toBe(false);
  });
});

describe('doctor over the admin API and the CLI', () => {
  let admin: FastifyInstance;
  let good: boolean;
  let base: string;
  beforeAll(async () => {
    admin = await startAdminApi(stack.core, '127.0.0.1', 0, ADMIN, { checks: () => runChecks(deps(good ? { plugins: () => [] } : {})) });
    base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => admin?.close());

  const cli = (url = base) =>
    new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [join(ROOT, 'dist/core/src/admin/cli.js'), 'doctor'], { env: { PATH: process.env.PATH, CARAPACE_ADMIN_URL: url, CARAPACE_ADMIN_TOKEN: ADMIN } }, (err, stdout) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout }),
      );
    });

  it('sets the free space of the workspaces\' disk against what new workspaces may still claim', async () => {
    const groups = join(stack.dir, 'claims');
    mkdirSync(groups, { recursive: true });
    const free = (await statfs(groups)).bavail * (await statfs(groups)).bsize;
    const settings = { disk_quota_mb: Math.ceil(free / 2 ** 20 / 2) + 1, disk_quota_mode: 'loop' as const };
    // One group's image exists (allocated in full when made): only the other may still claim.
    writeFileSync(join(groups, 'made.img'), '');
    const one = () => unclaimedBytes(groups, ['made', 'new'], settings);
    expect(one()).toBe(settings.disk_quota_mb * 2 ** 20);
    expect(find((await runChecks(deps({ folders: [{ name: 'workspaces', path: groups, claims: one }] }))).checks, 'disk-workspaces')).toMatchObject({ status: 'ok', detail: expect.stringContaining('New workspaces may still claim') });
    // Two new groups would need more than the disk has: said before the second fails to start.
    const two = () => unclaimedBytes(groups, ['made', 'new', 'newer'], settings);
    expect(find((await runChecks(deps({ folders: [{ name: 'workspaces', path: groups, claims: two }] }))).checks, 'disk-workspaces')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/free, but new workspaces may still claim .*the group that does not fit cannot start/), fix: expect.stringContaining('disk_quota_mb') });
    // Watchdog mode makes no images: nothing is set aside ahead.
    expect(unclaimedBytes(groups, ['new', 'newer'], { ...settings, disk_quota_mode: 'watchdog' })).toBe(0);
  });

  it('GET /doctor needs the token', async () => {
    expect((await fetch(`${base}/doctor`)).status).toBe(401);
  });

  it('the CLI prints each problem with its fix and exits non-zero; zero when all is well', async () => {
    good = false;
    const bad = await cli();
    expect(bad.code).toBe(1);
    expect(bad.out).toContain('✗ Plugin authfail');
    expect(bad.out).toContain('Fix:');
    good = true;
    const fine = await cli();
    expect(fine.out).toContain('✓ Model key');
    expect(fine.code).toBe(0);
  });

  it('says the core is not answering, with the fix, when it is not there', async () => {
    const away = await cli('http://127.0.0.1:1');
    expect(away.code).toBe(1);
    expect(away.out).toContain('docker compose up -d');
  });
});
