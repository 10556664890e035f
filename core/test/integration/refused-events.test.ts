// An event refused for configuration is never silent (issue 32): a channel's message for a
// group its section does not map, or whose policy does not list it, is kept by the core,
// the plugin turns red with the reason (the catalog the Overview and the Checks page show),
// the plugin hears that nothing started, and once carapace.json allows it the message is
// handled, once. A flood keeps the newest 100 and drops the rest with a notice.
// The real core, the real plugin host process, real files.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Session } from '../../src/boundary/session-table.js';
import { pluginChecks } from '../../src/doctor/checks.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import { Stack, sleep, until } from '../harness.js';

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
});
