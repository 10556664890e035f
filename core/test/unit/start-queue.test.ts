// What the plugin host keeps for a plugin still starting: in order, bounded by count and
// bytes, the oldest dropped first and counted.
import { describe, expect, it } from '@jest/globals';
import { MAX_QUEUED_BYTES, MAX_QUEUED_EVENTS, StartQueue } from '../../plugin-host/start-queue.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';

const event = (n: number, text = ''): EventEnvelope => ({ id: `e${n}`, type: 'event', topic: 'user.notify', source: 'core', group: 'main', timestamp: '2026-11-28T00:00:00Z', payload: { n, text } }) as unknown as EventEnvelope;

describe('StartQueue', () => {
  it('hands over what came, oldest first, then is empty', () => {
    const q = new StartQueue();
    for (let i = 0; i < 3; i++) q.add(event(i));
    expect(q.take()).toEqual({ envelopes: [event(0), event(1), event(2)], dropped: 0 });
    expect(q.take()).toEqual({ envelopes: [], dropped: 0 });
  });

  it(`keeps the newest ${MAX_QUEUED_EVENTS}, and says how many were dropped`, () => {
    const q = new StartQueue();
    for (let i = 0; i < MAX_QUEUED_EVENTS + 50; i++) q.add(event(i));
    const { envelopes, dropped } = q.take();
    expect(dropped).toBe(50);
    expect(envelopes.map((e) => e.id)).toEqual(Array.from({ length: MAX_QUEUED_EVENTS }, (_, i) => `e${i + 50}`));
  });

  it(`holds at most ${MAX_QUEUED_BYTES / 1024 / 1024} MiB: large events push the oldest out`, () => {
    const q = new StartQueue();
    const big = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 6; i++) q.add(event(i, big));
    const { envelopes, dropped } = q.take();
    expect(envelopes.map((e) => e.id)).toEqual(['e3', 'e4', 'e5']);
    expect(dropped).toBe(3);
  });
});
