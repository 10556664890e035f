// A plugin's powers come from its manifest and its own configuration, tried the way a
// hostile plugin would: publishing for groups and topics it was not given, answering
// confirmations without a channel, speaking another protocol version on the wire, leaving
// errors unhandled, and running on past its deadline. Real plugin host, real sockets.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import { Stack, sleep, until } from '../harness.js';
import { HOST_LINK_VERSION, SOCKETS } from '../../src/plugins/host-protocol.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import type { Session } from '../../src/boundary/session-table.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';

let stack: Stack;
let family: Session;
const accepted: EventEnvelope[] = [];

beforeAll(async () => {
  stack = await Stack.start({
    plugins: ['echo', 'services', 'hostile'],
    config: {
      groups: { family: {}, other: {} },
      handler_timeout_ms: 1000,
      handler_abort_grace_ms: 1500,
      // services is a channel whose one chat maps "family"; hostile declares no channel.
      plugins: { services: { chats: { c1: 'family' } } },
    },
  });
  stack.core.on('event', (e) => accepted.push(e));
  family = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

/** Waits for an audit entry that matches. */
function audited(matches: (e: AuditEntry) => boolean, timeoutMs = 5000): Promise<AuditEntry> {
  return until(() => stack.core.audit.query({}).find(matches), timeoutMs);
}

describe('events follow the manifest', () => {
  it('a plugin that declares no channel publishing message.inbound starts nothing: dropped and audited with the reason', async () => {
    expect((await stack.ipc(family, 'tool.invoke.hostile_publish', { topic: 'message.inbound', group: 'family' })).code).toBe(0);
    // The channel's own event, published after it, arrives: the bus has delivered the hostile one by then.
    expect((await stack.ipc(family, 'tool.invoke.publish_inbound', { group: 'family' })).code).toBe(0);
    await until(() => accepted.find((e) => e.source === 'services' && e.group === 'family'));
    const dropped = await audited((e) => e.source === 'hostile' && e.topic === 'message.inbound' && e.outcome === 'dropped');
    expect(dropped).toMatchObject({ stage: 'event', code: 'UNAUTHORIZED', group: 'family' });
    expect(dropped.reason).toMatch(/only a channel plugin/);
    expect(accepted.some((e) => e.source === 'hostile')).toBe(false);
  });

  it('a plugin that does not declare it schedules publishing task.triggered starts nothing either', async () => {
    expect((await stack.ipc(family, 'tool.invoke.hostile_publish', { topic: 'task.triggered', group: 'family' })).code).toBe(0);
    const dropped = await audited((e) => e.source === 'hostile' && e.topic === 'task.triggered' && e.outcome === 'dropped');
    expect(dropped.reason).toMatch(/provides\.schedules/);
    expect(accepted.some((e) => e.topic === 'task.triggered')).toBe(false);
  });

  it('a channel publishes only for the groups its own configuration maps (another is kept, unhandled, until the configuration allows it)', async () => {
    expect((await stack.ipc(family, 'tool.invoke.publish_inbound', { group: 'other' })).code).toBe(0);
    const held = await audited((e) => e.source === 'services' && e.group === 'other' && e.stage === 'event' && e.outcome === 'pending');
    expect(held).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(held.reason).toMatch(/not one that plugin's configuration maps/);
    expect(accepted.some((e) => e.group === 'other')).toBe(false);
  });
});

describe('answering confirmations is a channel power, for the chats it maps', () => {
  const ask = (group: string) => {
    const made = stack.core.confirmations.request({ group, session: family.id, tool: 'echo', correlation: `c-${group}-${Date.now()}`, arguments: { text: 'rm -rf' } });
    if (!made) throw new Error('no confirmation made');
    return made.pending;
  };

  it('a plugin without a channel cannot answer one (nor grant a standing approval) or list them: a structured error, audited', async () => {
    const pending = ask('family');
    try {
      const answered = await stack.ipc(family, 'tool.invoke.hostile_answer', { id: pending.id, group: 'family', allow_hours: 24 });
      expect(answered.code).toBe(1);
      expect(answered.err).toMatchObject({ code: 'SERVICE_UNAUTHORIZED' });
      expect(answered.err.message).toMatch(/only a channel plugin/);
      expect(stack.core.confirmations.get(pending.id)).toBeDefined();
      expect(stack.core.standing.list()).toEqual([]);
      const listed = await stack.ipc(family, 'tool.invoke.hostile_list', { group: 'family' });
      expect(listed.err).toMatchObject({ code: 'SERVICE_UNAUTHORIZED' });
      await audited((e) => e.source === 'hostile' && e.code === 'UNAUTHORIZED' && /^resolveConfirmation refused/.test(e.reason ?? ''));
      await audited((e) => e.source === 'hostile' && e.code === 'UNAUTHORIZED' && /^listConfirmations refused/.test(e.reason ?? ''));
    } finally {
      stack.core.confirmations.denyAll('test');
    }
  });

  it('a channel cannot answer or list one of a group its configuration does not map; it can for its own', async () => {
    const elsewhere = ask('other');
    const own = ask('family');
    try {
      const refused = await stack.ipc(family, 'tool.invoke.answer_confirmation', { id: elsewhere.id, group: 'other', allow_hours: 24 });
      expect(refused.err).toMatchObject({ code: 'SERVICE_UNAUTHORIZED' });
      expect(stack.core.confirmations.get(elsewhere.id)).toBeDefined();
      expect((await stack.ipc(family, 'tool.invoke.pending_confirmations', { group: 'other' })).err).toMatchObject({ code: 'SERVICE_UNAUTHORIZED' });
      await audited((e) => e.source === 'services' && e.group === 'other' && e.code === 'UNAUTHORIZED');

      expect((await stack.ipc(family, 'tool.invoke.pending_confirmations', { group: 'family' })).out.pending).toContain(own.id);
      expect((await stack.ipc(family, 'tool.invoke.answer_confirmation', { id: own.id, group: 'family' })).out).toEqual({ answered: true });
      expect(stack.core.standing.list()).toEqual([]);
    } finally {
      stack.core.confirmations.denyAll('test');
    }
  });
});

describe('the wire: a version the core does not speak is refused', () => {
  it('a published event with another envelope version is dropped and audited UNSUPPORTED_VERSION', async () => {
    const pub = new zmq.Publisher({ linger: 0 });
    pub.connect(`ipc://${join(stack.runDir, SOCKETS.busIn)}`);
    try {
      await sleep(300); // the core's subscription reaches a new publisher
      const event = { plugin: 'services', group: 'family', payload: { body: 'from version 2' }, version: 2 };
      await pub.send(['message.inbound', JSON.stringify(event)]);
      const dropped = await audited((e) => e.code === 'UNSUPPORTED_VERSION' && e.stage === 'event');
      expect(dropped.reason).toMatch(/version 2 is not one this core speaks/);
      expect(accepted.some((e) => e.payload.body === 'from version 2')).toBe(false);
    } finally {
      pub.close();
    }
  });
});

describe('the bus: an event too large', () => {
  it('is refused at the plugin host (its publish rejects INVALID_INPUT), and the bus carries the next event', async () => {
    // Over 2 MiB the core's end of the bus would cut the connection, and what was on its way with it.
    const big = await stack.ipc(family, 'tool.invoke.hostile_publish', { topic: 'message.inbound', group: 'family', bytes: 3 * 1024 * 1024 });
    expect(big.out).toEqual({ refused: 'INVALID_INPUT' });
    expect(stack.hostOutput).not.toMatch(/lost the link to the core/);
    const before = accepted.length;
    expect((await stack.ipc(family, 'tool.invoke.publish_inbound', { group: 'family' })).code).toBe(0);
    await until(() => accepted.length > before, 5000);
  });
});

describe("one plugin's stray errors are its own", () => {
  it('an unhandled rejection is reported as its fault; it and the others go on answering', async () => {
    expect(stack.core.catalog.state('hostile')).toBe('healthy');
    expect((await stack.ipc(family, 'tool.invoke.stray', { kind: 'rejection' })).code).toBe(0);
    const fault = await audited((e) => e.source === 'hostile' && e.severity === 'CRITICAL' && (e.reason ?? '').includes('unhandled promise rejection'));
    expect(fault.reason).toContain('hostile: a rejection nobody');
    expect((await stack.ipc(family, 'tool.invoke.echo', { text: 'after the rejection' })).out?.echoed?.text).toBe('after the rejection');
    expect((await stack.ipc(family, 'tool.invoke.dawdle', { ms: 0 })).out).toEqual({ dawdled: 0 });
    expect(stack.core.audit.query({}).some((e) => e.source === 'hostile' && /process of plugin "hostile" ended/.test(e.reason ?? ''))).toBe(false);
  });

  it('an uncaught exception is reported, ends only its own process, and it is started again', async () => {
    expect((await stack.ipc(family, 'tool.invoke.stray', { kind: 'exception' })).code).toBe(0);
    const fault = await audited((e) => e.source === 'hostile' && e.severity === 'CRITICAL' && (e.reason ?? '').includes('uncaught exception'));
    expect(fault.reason).toContain('hostile: an exception nobody');
    const down = await audited((e) => e.source === 'hostile' && /process of plugin "hostile" ended \(exited with code 70\)/.test(e.reason ?? ''));
    expect(down.outcome).toBe('error');
    // The others never noticed; the plugin host itself is still the same process.
    expect(stack.host?.exitCode).toBeNull();
    expect((await stack.ipc(family, 'tool.invoke.echo', { text: 'after the exception' })).out?.echoed?.text).toBe('after the exception');
    await until(() => stack.core.catalog.state('hostile') === 'healthy', 5000);
    expect((await stack.ipc(family, 'tool.invoke.dawdle', { ms: 0 })).out).toEqual({ dawdled: 0 });
  });
});

describe('cancellation at the deadline', () => {
  let upstream: Server;
  let url: string;
  /** Requests the stand-in received, and which of their connections closed. */
  const seen: { method: string; closed: boolean }[] = [];

  beforeAll(async () => {
    // Never answers: only an abort ends a request to it.
    upstream = createServer((req) => {
      const entry = { method: req.method ?? '', closed: false };
      seen.push(entry);
      req.socket.once('close', () => (entry.closed = true));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/slow`;
  });

  afterAll(async () => {
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  it('an aborted GET is cancelled (the upstream sees its connection close); stopped before acting, it is a retriable PLUGIN_TIMEOUT', async () => {
    const r = await stack.ipc(family, 'tool.invoke.fetch_upstream', { url, method: 'GET' });
    expect(r.err).toMatchObject({ code: 'PLUGIN_TIMEOUT', stage: 6, retriable: true });
    await until(() => seen.find((s) => s.method === 'GET')?.closed, 2000);
    const entry = await audited((e) => e.stage === 'handler' && e.topic === 'tool.invoke.fetch_upstream' && e.code === 'PLUGIN_TIMEOUT');
    expect(entry.detail).toMatch(/stopped before acting/);
  });

  it('an aborted POST is cancelled too, but may have acted: RESULT_UNKNOWN, not retriable', async () => {
    const r = await stack.ipc(family, 'tool.invoke.fetch_upstream', { url, method: 'POST' });
    expect(r.err).toMatchObject({ code: 'RESULT_UNKNOWN', stage: 6, retriable: false });
    await until(() => seen.find((s) => s.method === 'POST')?.closed, 2000);
    const entry = await audited((e) => e.stage === 'handler' && e.topic === 'tool.invoke.fetch_upstream' && e.code === 'RESULT_UNKNOWN');
    expect(entry.detail).toMatch(/did not stop before acting; it ended with crash/);
  });

  it('a handler that ignores the abort: RESULT_UNKNOWN at once, and its final word is audited when it comes', async () => {
    const started = Date.now();
    const r = await stack.ipc(family, 'tool.invoke.dawdle', { ms: 4000 });
    expect(r.err).toMatchObject({ code: 'RESULT_UNKNOWN', retriable: false });
    expect(Date.now() - started).toBeLessThan(3900);
    const late = await audited((e) => e.stage === 'handler' && e.topic === 'tool.invoke.dawdle' && /ran on and ended with result/.test(e.reason ?? ''), 6000);
    expect(late).toMatchObject({ source: 'hostile', outcome: 'error', group: 'family' });
  });
});

// Last: the refused connection's close reads, to the core, like the linked host's own
// (a disconnect names no peer), so nothing runs after it.
describe('the wire: a plugin host in another protocol version', () => {
  it('gets a structured refusal on hello, and does not replace the linked host', async () => {
    const dealer = new zmq.Dealer({ linger: 0, receiveTimeout: 3000 });
    dealer.connect(`ipc://${join(stack.runDir, SOCKETS.pluginHost)}`);
    try {
      // Version 1: a host that read carapace.json itself, and could run on another configuration
      // than the core's. Version 2: one message per frame, it would drop the core's batches.
      for (const version of [1, 2]) {
        await dealer.send(JSON.stringify({ t: 'hello', pid: 4242, secrets: [], version }));
        const [reply] = await dealer.receive();
        expect(JSON.parse(reply.toString('utf8'))).toMatchObject({ t: 'refused', code: 'UNSUPPORTED_VERSION', speaks: [HOST_LINK_VERSION] });
        await audited((e) => e.code === 'UNSUPPORTED_VERSION' && e.source === 'plugin-host' && e.reason?.includes(`version ${version} was refused`) === true);
      }
      expect(stack.core.audit.query({}).some((e) => e.reason === 'plugin host connected (pid 4242)')).toBe(false);
      expect((await stack.ipc(family, 'tool.invoke.echo', { text: 'still here' })).out?.echoed?.text).toBe('still here');
    } finally {
      dealer.close();
    }
  });
});
