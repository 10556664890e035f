// An event refused for configuration is never silent (issue 32): a channel's message for a
// group its section does not map, or whose policy does not list it, is kept by the core,
// the plugin turns red with the reason (the catalog the Overview and the Checks page show),
// the plugin hears that nothing started, and once carapace.json allows it the message is
// handled, once. A flood keeps the newest 100 and drops the rest with a notice; the person
// may discard them on the Overview instead (Chromium).
// The real core, the real plugin host process, real files.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { Session } from '../../src/boundary/session-table.js';
import { pluginChecks } from '../../src/doctor/checks.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import { Stack, sleep, until } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';

const CONFIG = { groups: { family: {}, friends: {} }, plugins: { mapped: { chats: { c1: 'family' } } } };

let stack: Stack;
let session: Session;
const accepted: EventEnvelope[] = [];
const bodies = (prefix: string) => accepted.filter((e) => String(e.payload.body).startsWith(prefix));
const mapped = () => stack.core.catalog.states().find((s) => s.name === 'mapped')!;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['mapped'], config: CONFIG });
  stack.core.on('event', (e) => accepted.push(e));
  session = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

async function publish(group: string, body: string, count = 1): Promise<{ held?: string }> {
  // A change to its section starts the plugin again: its tool answers once it is back.
  await until(() => stack.core.catalog.state('mapped') === 'healthy', 15_000);
  const r = await stack.ipc(session, 'tool.invoke.mapped_publish', { group, body, count }, { timeoutMs: 60_000 });
  expect(r.code).toBe(0);
  return r.out;
}

describe('events refused for configuration', () => {
  it('are kept and told: the plugin hears nothing started, it turns red with the reason, and Activity says so', async () => {
    const since = new Date().toISOString();
    const outcome = await publish('friends', 'for friends');
    expect(outcome.held).toMatch(/group "friends" is not one that plugin's configuration maps/);
    await sleep(200);
    expect(bodies('for friends')).toEqual([]);
    expect(mapped().state).toBe('healthy'); // its tools still work
    expect(mapped().refusing).toMatch(/^1 message was not handled: group "friends" is not one that plugin's configuration maps.*handled once carapace.json allows them/);
    expect(pluginChecks(stack.core.catalog.states())).toContainEqual(expect.objectContaining({ id: 'plugin-mapped', status: 'fail', detail: expect.stringContaining('not handled') }));
    const entries = stack.core.audit.query({ since });
    expect(entries).toContainEqual(expect.objectContaining({ stage: 'event', source: 'mapped', group: 'friends', outcome: 'pending', code: 'UNAUTHORIZED' }));
    expect(entries).toContainEqual(expect.objectContaining({ stage: 'plugin', source: 'mapped', outcome: 'error', code: 'UNAUTHORIZED' }));
    // The same event published again (a plugin's replay after a crash) is kept once.
    await publish('friends', 'for friends');
    expect(mapped().refusing).toMatch(/^1 message was not handled/);
  });

  it('once carapace.json allows it, the kept message is handled, once, and the red state clears', async () => {
    await stack.writeConfig({ ...CONFIG, plugins: { mapped: { chats: { c1: 'family', c2: 'friends' } } } });
    const event = await until(() => bodies('for friends')[0], 10_000);
    expect(event.group).toBe('friends');
    await until(() => mapped().refusing === null, 5000);
    expect(stack.core.audit.query({}).some((e) => e.source === 'mapped' && /^held event accepted/.test(e.reason ?? ''))).toBe(true);
    // Another change later does not hand it over again, nor does the plugin's replay.
    await stack.writeConfig({ ...CONFIG, groups: { ...CONFIG.groups, later: {} }, plugins: { mapped: { chats: { c1: 'family', c2: 'friends' } } } });
    expect((await publish('friends', 'for friends')).held).toBeUndefined();
    await sleep(500);
    expect(bodies('for friends')).toHaveLength(1);
  }, 30_000);

  it('a flood keeps the newest 100, drops the older ones with a notice, and the kept ones are handled once allowed', async () => {
    const since = new Date().toISOString();
    await publish('strangers', 'flood', 105);
    const dropped = stack.core.audit.query({ since }).filter((e) => e.outcome === 'dropped' && e.source === 'mapped');
    expect(dropped).toHaveLength(5);
    expect(dropped[0].reason).toMatch(/more than 100 events/);
    expect(mapped().refusing).toMatch(/^100 messages were not handled.*5 older ones were dropped/);
    await stack.writeConfig({ groups: { ...CONFIG.groups, strangers: {} }, plugins: { mapped: { chats: { c1: 'family', c2: 'friends', c3: 'strangers' } } } });
    await until(() => bodies('flood').length === 100, 15_000);
    expect(bodies('flood').map((e) => e.payload.body)).toEqual(Array.from({ length: 100 }, (_, i) => `flood ${i + 5}`));
    await until(() => mapped().refusing === null, 5000);
  }, 60_000);

  it("the person discards them on the Overview: each dropped and said, the red state gone, and a configuration that allows them later handles none", async () => {
    const since = new Date().toISOString();
    await publish('neighbours', 'for neighbours', 3);
    expect(mapped().refusing).toMatch(/^3 messages were not handled/);
    const TOKEN = 'held-messages-token-0123456789';
    const admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { console: { folders: [] } });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${(admin.server.address() as AddressInfo).port}/`);
      await logIn(page, TOKEN, '.refusing button.discard-held');
      const asked: string[] = [];
      page.on('dialog', (dialog) => {
        asked.push(dialog.message());
        void (asked.length === 1 ? dialog.dismiss() : dialog.accept());
      });
      // Cancelled first: nothing goes.
      await page.click('.refusing button.discard-held');
      await until(() => asked.length === 1, 5000);
      await sleep(300);
      expect(mapped().refusing).toMatch(/^3 messages were not handled/);
      await page.click('.refusing button.discard-held');
      await page.waitForFunction(() => document.querySelector('.refusing') === null && document.body.textContent?.includes('mapped'), { timeout: 15_000 });
      expect(asked).toEqual(['Discard the messages held for mapped? They will never be handled.', 'Discard the messages held for mapped? They will never be handled.']);
    } finally {
      await browser.close();
      await admin.close();
    }
    expect(mapped().refusing).toBeNull();
    const discarded = stack.core.audit.query({ since }).filter((e) => e.source === 'mapped' && e.outcome === 'dropped');
    expect(discarded.map((e) => e.reason)).toEqual(Array.from({ length: 3 }, () => expect.stringMatching(/: discarded by console, never handled$/)));
    await stack.writeConfig({ groups: { ...CONFIG.groups, strangers: {}, neighbours: {} }, plugins: { mapped: { chats: { c1: 'family', c2: 'friends', c3: 'strangers', c4: 'neighbours' } } } });
    await sleep(1000);
    expect(bodies('for neighbours')).toEqual([]);
  }, 90_000);
});
