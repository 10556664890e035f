// One configuration, in every process (DESIGN 18): the core reads carapace.json and hands
// each plugin its section over the link; the plugin host never reads the file. Issue 32:
// a person added a channel's chat to carapace.json and restarted only the plugin host
// (`docker compose up -d` does that when .env changed); the plugin ran on the new file, the
// core on the old one, and the first message was dropped as UNAUTHORIZED, silently.
// A change to the file now takes effect while everything runs, everywhere or nowhere.
// The real core, the real plugin host process, real files.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { renameSync, writeFileSync } from 'node:fs';
import type { Session } from '../../src/boundary/session-table.js';
import { configCheck } from '../../src/doctor/checks.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import { Stack, sleep, until } from '../harness.js';

const TOKEN = 'mapped-secret-value-0123456789';
/** The token as an agent sees it: the host told the core the value it filled in, so the core scrubs it. */
const SEEN = '[REDACTED]';
const GROUPS = { family: {}, friends: {} };
const FIRST = { groups: GROUPS, plugins: { mapped: { chats: { c1: 'family' }, token: '${MAPPED_TOKEN}' } } };
const WITH_FRIENDS = { groups: GROUPS, plugins: { mapped: { chats: { c1: 'family', c2: 'friends' }, token: '${MAPPED_TOKEN}' } } };
const WITH_NEIGHBOURS = {
  groups: { ...GROUPS, neighbours: {} },
  plugins: { mapped: { chats: { c1: 'family', c2: 'friends', c3: 'neighbours' }, token: '${MAPPED_TOKEN}' } },
  rate_limit: { per_minute: 600, burst: 50 },
  agents: { idle_timeout_ms: 60_000 },
};

let stack: Stack;
let session: Session;
const accepted: EventEnvelope[] = [];

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['mapped', 'echo'], config: FIRST, env: { MAPPED_TOKEN: TOKEN } });
  stack.core.on('event', (e) => accepted.push(e));
  session = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

async function plugin(): Promise<{ settings: Record<string, unknown>; pid: number }> {
  const r = await stack.ipc(session, 'tool.invoke.mapped_settings', {});
  expect(r.code).toBe(0);
  return r.out;
}

/** Kills the plugin host and starts another; resolves once its "mapped" has started. */
async function restartHost(): Promise<void> {
  await stack.killHost();
  const since = new Date().toISOString();
  stack.startHost();
  await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'mapped' && e.reason === 'initialized'), 15_000);
}

const audited = (since: string, reason: RegExp) => stack.core.audit.query({ since }).find((e) => reason.test(e.reason ?? ''));
const initializations = (name: string) => stack.core.audit.query({}).filter((e) => e.source === name && e.reason === 'initialized').length;

async function publish(group: string, body: string): Promise<void> {
  expect((await stack.ipc(session, 'tool.invoke.mapped_publish', { group, body })).code).toBe(0);
}

describe('one configuration', () => {
  it('a plugin host that restarts runs each plugin on the core\'s configuration, never on a file the core has not taken', async () => {
    expect((await plugin()).settings).toEqual({ ...FIRST.plugins.mapped, token: SEEN });
    // The person edits the file and restarts only the plugin host.
    const since = new Date().toISOString();
    writeFileSync(stack.configFile, JSON.stringify(WITH_FRIENDS, null, 2));
    await restartHost();
    // The core takes the edit by itself (before, it kept the file it started with until it restarted).
    await until(() => audited(since, /^carapace\.json changed/), 10_000).catch(() => undefined);
    // Whatever the core runs on, the plugin runs on the same (the token filled in by the host).
    const sameAsCore = async (): Promise<boolean> => {
      const running = await plugin().catch(() => null);
      return JSON.stringify(running?.settings) === JSON.stringify({ ...stack.core.config.plugins.mapped, token: SEEN });
    };
    for (const deadline = Date.now() + 10_000; !(await sameAsCore()); await sleep(200)) {
      if (Date.now() > deadline) expect((await plugin()).settings).toEqual({ ...stack.core.config.plugins.mapped, token: SEEN });
    }
    // And the newly mapped group's message is taken, not dropped as UNAUTHORIZED.
    await publish('friends', 'first message for friends');
    const event = await until(() => accepted.find((e) => e.payload.body === 'first message for friends'), 5000).catch(() => undefined);
    expect(stack.core.audit.query({}).filter((e) => e.source === 'mapped' && e.stage === 'event' && e.outcome === 'dropped').map((e) => e.reason)).toEqual([]);
    expect(event?.group).toBe('friends');
  }, 40_000);

  it('an edit takes effect without a restart: only the plugin whose section changed starts again, and Activity says what changed, never a value', async () => {
    const before = await plugin();
    const echoStarts = initializations('echo');
    const since = new Date().toISOString();
    writeFileSync(stack.configFile, JSON.stringify(WITH_NEIGHBOURS, null, 2));
    const said = await until(() => audited(since, /^carapace\.json changed/), 10_000);
    expect(said).toMatchObject({ stage: 'core', outcome: 'ok' });
    expect(said.reason).toContain('groups added: "neighbours"');
    expect(said.reason).toContain('plugin settings changed (started again): "mapped"');
    expect(said.reason).toContain('rate limits changed');
    expect(said.reason).toContain('waiting for a restart of the core (docker compose restart): agents');
    expect(JSON.stringify(stack.core.audit.query({ since }))).not.toContain(TOKEN);
    await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'mapped' && e.reason === 'initialized'), 15_000);
    const after = await plugin();
    expect(after.pid).not.toBe(before.pid);
    expect(after.settings).toEqual({ ...WITH_NEIGHBOURS.plugins.mapped, token: SEEN });
    expect(initializations('echo')).toBe(echoStarts);
    expect(stack.core.config.rate_limit).toEqual({ per_minute: 600, burst: 50 });
    // Settings built once at start wait for a restart, and say so.
    expect(stack.core.config.agents.idle_timeout_ms).toBe(900_000);
    expect(stack.core.configStatus()).toEqual({ problem: null, waiting_for_restart: ['agents'] });
    expect(configCheck(stack.core.configStatus())).toMatchObject({ status: 'warn', detail: expect.stringContaining('agents') });
    await publish('neighbours', 'hello neighbours');
    expect((await until(() => accepted.find((e) => e.payload.body === 'hello neighbours'), 5000)).group).toBe('neighbours');
  }, 40_000);

  it('a broken edit keeps the running configuration everywhere and says where it is wrong until it is fixed; a half-written file is never taken', async () => {
    const before = await plugin();
    const since = new Date().toISOString();
    // A comma missing at the end of line 3: line 4, column 5.
    writeFileSync(stack.configFile, '{\n  "groups": {\n    "family": {}\n    "friends": {}\n  }\n}\n');
    const said = await until(() => audited(since, /^carapace\.json changed but is broken/), 10_000);
    expect(said).toMatchObject({ stage: 'core', outcome: 'error', code: 'CONFIG_INVALID' });
    expect(said.reason).toContain('line 4, column 5: not valid JSON: expected a comma');
    expect(stack.core.configStatus().problem).toMatchObject({ line: 4, column: 5 });
    // The Checks page (and make doctor) say it the way safe mode does.
    expect(configCheck(stack.core.configStatus())).toMatchObject({ id: 'config', status: 'fail', detail: expect.stringContaining('line 4, column 5: not valid JSON: expected a comma') });
    expect(stack.core.config.groups).toHaveProperty('neighbours');
    await publish('neighbours', 'still mapped');
    await until(() => accepted.find((e) => e.payload.body === 'still mapped'), 5000);
    expect((await plugin()).pid).toBe(before.pid);

    // Written in two parts, as an editor that truncates first: the half is never reported or applied.
    const half = new Date().toISOString();
    const whole = JSON.stringify({ ...WITH_NEIGHBOURS, groups: { ...WITH_NEIGHBOURS.groups, cousins: {} } }, null, 2);
    writeFileSync(stack.configFile, whole.slice(0, 40));
    await sleep(100);
    writeFileSync(stack.configFile, whole);
    await until(() => audited(half, /^carapace\.json is valid again/), 10_000);
    await until(() => audited(half, /groups added: "cousins"/), 10_000);
    expect(stack.core.audit.query({ since: half }).filter((e) => e.code === 'CONFIG_INVALID')).toEqual([]);
    expect(stack.core.configStatus().problem).toBeNull();
    // Only groups changed: no plugin started again.
    expect((await plugin()).pid).toBe(before.pid);
  }, 40_000);

  it('an editor that saves by renaming a new file over the old one is noticed too', async () => {
    const since = new Date().toISOString();
    const temp = `${stack.configFile}.swp`;
    writeFileSync(temp, JSON.stringify({ ...WITH_NEIGHBOURS, groups: { ...WITH_NEIGHBOURS.groups, cousins: {}, renamed: {} } }));
    renameSync(temp, stack.configFile);
    await until(() => audited(since, /groups added: "renamed"/), 10_000);
    expect(stack.core.config.groups).toHaveProperty('renamed');
  });

  it('pairing\'s own write is applied once: the watcher finds nothing new, and the channel is not started again', async () => {
    const before = await plugin();
    const request = stack.core.pairing.request('mapped', 'c9', { name: 'a new chat' });
    expect(request).not.toBeNull();
    const since = new Date().toISOString();
    expect(stack.core.pairing.approve(request!.code, 'family', false, 'test')).toMatchObject({ ok: true });
    await sleep(1500);
    expect(stack.core.audit.query({ since }).filter((e) => /^carapace\.json/.test(e.reason ?? ''))).toEqual([]);
    expect((await plugin()).pid).toBe(before.pid);
    expect(stack.core.catalog.state('mapped')).toBe('healthy');
    // A later start of the plugin gets the paired chat: the host holds the new section.
    await restartHost();
    expect(((await plugin()).settings.chats as Record<string, string>).c9).toBe('family');
  }, 40_000);
});
