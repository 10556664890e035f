// One configuration, in every process (DESIGN 18): the core reads carapace.json and hands
// each plugin its section over the link; the plugin host never reads the file. Issue 32:
// a person added a channel's chat to carapace.json and restarted only the plugin host
// (`docker compose up -d` does that when .env changed); the plugin ran on the new file, the
// core on the old one, and the first message was dropped as UNAUTHORIZED, silently.
// The real core, the real plugin host process, real files.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import type { Session } from '../../src/boundary/session-table.js';
import { Stack, until } from '../harness.js';

const FIRST = { groups: { family: {}, friends: {} }, plugins: { mapped: { chats: { c1: 'family' } } } };
const WITH_FRIENDS = { groups: { family: {}, friends: {} }, plugins: { mapped: { chats: { c1: 'family', c2: 'friends' } } } };

let stack: Stack;
let session: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['mapped', 'echo'], config: FIRST });
  session = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

async function pluginSettings(): Promise<unknown> {
  const r = await stack.ipc(session, 'tool.invoke.mapped_settings', {});
  expect(r.code).toBe(0);
  return r.out.settings;
}

/** Kills the plugin host and starts another; resolves once its "mapped" has started. */
async function restartHost(): Promise<void> {
  await stack.killHost();
  const since = new Date().toISOString();
  stack.startHost();
  await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'mapped' && e.reason === 'initialized'), 15_000);
}

describe('one configuration', () => {
  it('a plugin host that restarts runs each plugin on the core\'s configuration, never on a file the core has not taken', async () => {
    expect(await pluginSettings()).toEqual(FIRST.plugins.mapped);
    // The person edits the file and restarts only the plugin host.
    writeFileSync(stack.configFile, JSON.stringify(WITH_FRIENDS, null, 2));
    await restartHost();
    expect(await pluginSettings()).toEqual(stack.core.config.plugins.mapped);
  });
});
