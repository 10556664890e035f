// Hostile bytes on a session socket: every message gets a structured answer, nothing
// crashes, everything is audited. Uses a raw ZeroMQ DEALER, as a compromised agent would.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as zmq from 'zeromq';
import { Stack, UNGUARDED_SESSIONS } from '../harness.js';
import type { Session } from '../../src/boundary/session-table.js';

let stack: Stack;
let session: Session;
let dealer: zmq.Dealer;

beforeAll(async () => {
  stack = await Stack.start({
    plugins: ['echo'],
    config: {
      rate_limit: { per_minute: 1_000_000, burst: 100_000 },
      // The session guard would (rightly) quarantine the burst below: this suite tests the pipeline.
      sessions: UNGUARDED_SESSIONS,
    },
  });
  session = await stack.openSession('family');
  dealer = new zmq.Dealer({ linger: 0, receiveTimeout: 5000 });
  dealer.connect(`ipc://${session.socketPath}`);
});

afterAll(async () => {
  dealer?.close();
  await stack?.stop();
});

async function exchange(frames: (Buffer | string)[]): Promise<any> {
  await dealer.send(frames);
  const reply = await dealer.receive();
  return JSON.parse(reply.at(-1)!.toString('utf8'));
}

describe('malformed wire messages', () => {
  it.each([
    ['not JSON', ['{nope'], 'message'],
    ['a JSON array', ['[1,2]'], 'message'],
    ['invalid UTF-8', [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])], 'message'],
    ['no correlation', [JSON.stringify({ topic: 'tool.invoke.echo', arguments: { text: 'a' } })], 'correlation'],
    ['a non-string topic', [JSON.stringify({ topic: 7, correlation: 'c1', arguments: {} })], 'topic'],
    ['arguments that are not an object', [JSON.stringify({ topic: 'tool.invoke.echo', correlation: 'c2', arguments: 'x' })], 'arguments'],
    ['two frames', ['{}', '{}'], 'message'],
  ])('%s → VALIDATION_FAILED at stage 1', async (_name, frames, field) => {
    const reply = await exchange(frames as (Buffer | string)[]);
    expect(reply.type).toBe('response');
    expect(reply.group).toBe('family');
    expect(reply.payload.result).toBeNull();
    expect(reply.payload.error).toMatchObject({ code: 'VALIDATION_FAILED', stage: 1, field, retriable: false });
  });

  it('an oversized message (> 1 MB) gets a structured error', async () => {
    const big = JSON.stringify({ topic: 'tool.invoke.echo', correlation: 'big', arguments: { text: 'z'.repeat(1024 * 1024 + 1) } });
    const reply = await exchange([big]);
    expect(reply.payload.error).toMatchObject({ code: 'VALIDATION_FAILED', stage: 1 });
  });

  it('identity fields in the wire message are ignored: group and source come from the socket', async () => {
    const forged = { topic: 'tool.invoke.echo', correlation: 'forge-1', arguments: { text: 'x' }, group: 'admin', source: 'core', id: 'mine', version: 99 };
    const reply = await exchange([JSON.stringify(forged)]);
    expect(reply.payload.error).toBeNull();
    expect(reply.payload.result).toEqual({ echoed: { text: 'x', count: 1 }, group: 'family', source: session.id });
    expect(reply.group).toBe('family');
    expect(reply.correlation).toBe('forge-1');
    expect(reply.id).not.toBe('mine');
  });
});

describe('repeats', () => {
  it('a request resent with the same correlation is answered once, not acted on twice', async () => {
    const message = JSON.stringify({ topic: 'tool.invoke.echo', correlation: 'resent-1', arguments: { text: 'once' } });
    const first = await exchange([message]);
    const second = await exchange([message]);
    expect(second.payload).toEqual(first.payload);
    const routed = stack.core.audit.query({ correlation: 'resent-1' }).filter((e) => e.stage === 'route');
    expect(routed).toHaveLength(1);
  });
});

describe('a burst', () => {
  it('answers thousands of mixed requests, each structured, and stays up', async () => {
    const n = 3000;
    const sent = new Map<string, 'good' | 'bad' | 'unknown'>();
    const sending = (async () => {
      for (let i = 0; i < n; i++) {
        const kind = i % 3 === 0 ? 'good' : i % 3 === 1 ? 'bad' : 'unknown';
        const correlation = `burst-${i}`;
        sent.set(correlation, kind);
        const message =
          kind === 'good'
            ? { topic: 'tool.invoke.echo', correlation, arguments: { text: String(i) } }
            : kind === 'bad'
              ? { topic: 'tool.invoke.echo', correlation, arguments: { text: i } }
              : { topic: 'tool.invoke.missing', correlation, arguments: {} };
        await dealer.send(JSON.stringify(message));
      }
    })();
    const seen = new Map<string, any>();
    while (seen.size < n) {
      const [frame] = await dealer.receive();
      const reply = JSON.parse(frame.toString('utf8'));
      seen.set(reply.correlation, reply);
    }
    await sending;
    for (const [correlation, kind] of sent) {
      const reply = seen.get(correlation);
      if (kind === 'good') expect(reply.payload.error).toBeNull();
      else expect(reply.payload.error.code).toBe(kind === 'bad' ? 'VALIDATION_FAILED' : 'UNKNOWN_TOOL');
    }
    // Every request that reached the handler is audited; repeated rejections open one
    // burst each (written whole), the rest wait for the burst's summary line.
    const responses = (await stack.auditEntries()).filter((e) => e.stage === 'response' && e.correlation?.startsWith('burst-'));
    const good = [...sent].filter(([, kind]) => kind === 'good').map(([c]) => c);
    expect(new Set(responses.map((e) => e.correlation))).toEqual(new Set([...good, 'burst-1', 'burst-2']));
    // Still serving afterwards.
    const after = await exchange([JSON.stringify({ topic: 'tool.invoke.get_session_info', correlation: 'after', arguments: {} })]);
    expect(after.payload.result.group).toBe('family');
  });
});
