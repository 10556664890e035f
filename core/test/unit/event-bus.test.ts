// What the core's event bus holds for a plugin with no subscription (its host gone, or not
// subscribed yet): in order, the newest kept within a count and a byte bound, handed over
// when it subscribes. Real ZeroMQ sockets on ipc:// endpoints.
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import { EventBus } from '../../src/bus/event-bus.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';

let dir: string;
let bus: EventBus | null = null;
let sub: zmq.Subscriber | null = null;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'event-bus-'));
});

afterEach(async () => {
  sub?.close();
  sub = null;
  await bus?.close();
  bus = null;
  rmSync(dir, { recursive: true, force: true });
});

const event = (n: number, text: string): EventEnvelope => ({ topic: 'user.notify', n, text }) as unknown as EventEnvelope;

it('events for a plugin without a subscription wait, in order, the oldest dropped beyond 16 MiB', async () => {
  bus = new EventBus();
  const out = `ipc://${join(dir, 'out.sock')}`;
  await bus.open(out, `ipc://${join(dir, 'in.sock')}`, () => undefined);
  const MB = 'x'.repeat(1024 * 1024);
  for (let n = 1; n <= 40; n++) await bus.deliver('telegram', event(n, MB));
  sub = new zmq.Subscriber({ maxMessageSize: 4 * 1024 * 1024 });
  sub.connect(out);
  sub.subscribe('telegram user.');
  // The newest (40) comes last: read until it has.
  const got: number[] = [];
  sub.receiveTimeout = 20_000;
  while (got.at(-1) !== 40) {
    const [, body] = await sub.receive();
    got.push((JSON.parse(body.toString('utf8')) as { n: number }).n);
  }
  // Each held event is a little over 1 MiB: fifteen fit.
  expect(got).toEqual(Array.from({ length: 15 }, (_, i) => 26 + i));
});

it('an event for a plugin that is not running waits, even where its subscription still stands, until it is released', async () => {
  bus = new EventBus();
  const out = `ipc://${join(dir, 'out2.sock')}`;
  await bus.open(out, `ipc://${join(dir, 'in2.sock')}`, () => undefined);
  sub = new zmq.Subscriber({ receiveTimeout: 500 });
  sub.connect(out);
  sub.subscribe('telegram user.');
  // The subscription has reached the bus once a ready event comes through.
  for (let n = 0; ; n++) {
    await bus.deliver('telegram', event(n, 'probe'));
    const got = await sub.receive().catch(() => null);
    if (got) break;
  }
  await bus.deliver('telegram', event(100, 'while it starts again'), false);
  await expect(sub.receive()).rejects.toThrow();
  bus.release('telegram');
  sub.receiveTimeout = 10_000;
  const [, body] = await sub.receive();
  expect((JSON.parse(body.toString('utf8')) as { n: number }).n).toBe(100);
});
