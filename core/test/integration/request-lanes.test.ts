// Requests go straight to a plugin's process on its request lane (plugins/request-lanes.ts),
// the plugin host only supervising: answered while the host is stopped (SIGSTOP). A
// hostile plugin writing on its lane what no runner would (garbage, an answer to a request
// it never got, another kind of message, a line without end) loses its lane, audited; its
// requests go through the host again and the core answers everyone. A connection to the
// lane socket that is not the host's (no token, a wrong one, a hello without end) gets
// nothing. Real core, plugin host, plugin processes, the real ipc binary.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Session } from '../../src/boundary/session-table.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { Stack, until } from '../harness.js';
import { expectError, expectOk } from '../support/expect-ipc.js';

let stack: Stack;
let main: Session;

/** A fresh core, host and plugin processes: each has its lane. */
async function start(): Promise<void> {
  await stack?.stop();
  stack = await Stack.start({ plugins: ['echo', 'hostile'], config: { groups: { main: {} } } });
  main = await stack.openSession('main');
}

beforeAll(start);

afterAll(async () => {
  await stack?.stop();
});

const echo = async (text: string): Promise<void> => expect(expectOk(await stack.ipc(main, 'tool.invoke.echo', { text }))).toMatchObject({ echoed: { text } });
/** Runs `during` with the plugin host stopped (SIGSTOP): what is answered meanwhile did not pass through it. */
async function whileHostStopped<T>(during: () => Promise<T>): Promise<T> {
  const host = stack.host!;
  host.kill('SIGSTOP');
  try {
    return await during();
  } finally {
    host.kill('SIGCONT');
  }
}
const laneClosed = (plugin: string) => stack.core.audit.query({}).filter((e) => e.code === 'LANE_CLOSED' && e.source === plugin);

describe('a request lane', () => {
  it('carries requests past the plugin host: answered while the host is stopped', async () => {
    await echo('first');
    await whileHostStopped(() => echo('while the host sleeps'));
    await echo('after');
  });

  it.each([
    ['garbage', 'a line that is not JSON'],
    ['stranger', 'an answer to a request not sent on its lane'],
    ['other', 'a message other than a response'],
    ['huge', `a line over ${4 * 1024 * 1024} bytes`],
  ])('a plugin writing %s on its lane loses it (audited); its requests go through the host, nobody waits', async (kind, said) => {
    await start();
    const before = laneClosed('hostile').length;
    const r = await stack.ipc(main, 'tool.invoke.hostile_lane', { kind }, { timeoutMs: 20_000 });
    // The call that broke the lane was on it: its answer can no longer come, so it is not known.
    expectError(r, 'RESULT_UNKNOWN');
    await until(() => laneClosed('hostile').length > before, 10_000);
    expect(laneClosed('hostile').at(-1)).toMatchObject({ severity: 'CRITICAL', reason: expect.stringContaining(said) });
    // The next call goes through the plugin host (the lane is gone until its process starts again): it waits for a stopped host.
    let answered = false;
    const next = await whileHostStopped(async () => {
      const call = stack.ipc(main, 'tool.invoke.hostile_list', { group: 'main' }).finally(() => (answered = true));
      await new Promise((r) => setTimeout(r, 500));
      expect(answered).toBe(false);
      return { call };
    });
    // Its answer (a refusal of the power it tried) came through the host.
    expectError(await next.call, 'SERVICE_UNAUTHORIZED');
    // Another plugin's lane is untouched.
    await echo(`after ${kind}`);
  }, 30_000);
});

describe('the lane socket', () => {
  const attempt = (hello: string | Buffer): Promise<string> =>
    new Promise((resolve) => {
      const socket = connect(join(stack.runDir, SOCKETS.lanes));
      socket.on('connect', () => socket.write(hello));
      socket.on('error', () => resolve('error'));
      socket.on('close', () => resolve('closed'));
    });

  it('closes a connection whose hello is not the host\'s: no token, a wrong one, not JSON, without end', async () => {
    expect(await attempt('{"t":"lane","plugin":"echo"}\n')).toBe('closed');
    expect(await attempt(`{"t":"lane","plugin":"echo","token":"${'0'.repeat(48)}"}\n`)).toBe('closed');
    expect(await attempt('GET / HTTP/1.1\r\n\r\n')).toBe('closed');
    expect(await attempt(Buffer.alloc(4096, 'x'))).toBe('closed');
    // The plugin's own lane still carries its requests.
    await whileHostStopped(() => echo('still on its lane'));
  });
});
