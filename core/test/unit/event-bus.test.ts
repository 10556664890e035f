// What the core's event bus holds for a plugin with no subscription (its host gone, or not
// subscribed yet): in order, the newest kept within a count and a byte bound, handed over
// when it subscribes. Real ZeroMQ sockets on ipc:// endpoints.
import { afterEach, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import { EventBus } from '../../src/bus/event-bus.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';

const dir = mkdtempSync(join(tmpdir(), 'event-bus-'));
let bus: EventBus | null = null;
let sub: zmq.Subscriber | null = null;

afterEach(async () => {
  sub?.close();
  await bus?.close();
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
