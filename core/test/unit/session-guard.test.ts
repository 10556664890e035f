import { describe, expect, it } from '@jest/globals';
import { parseConfig } from '../../src/config.js';
import { SessionGuard, type Abuse } from '../../src/boundary/session-guard.js';

function guard(limits: Record<string, number>) {
  let now = 0;
  const trips: Abuse[] = [];
  const g = new SessionGuard(parseConfig({ sessions: limits }).sessions, (a) => trips.push(a), () => now);
  return { g, trips, advance: (ms: number) => void (now += ms) };
}

describe('SessionGuard', () => {
  it('admits the burst, refuses the next with an honest retry_after, and refills', () => {
    const { g, advance } = guard({ requests_per_minute: 60, burst: 3 });
    for (let i = 0; i < 3; i++) {
      expect(g.admit(10)).toEqual({ ok: true });
      g.settled();
    }
    expect(g.admit(10)).toEqual({ ok: false, retryAfter: 1, why: 'rate' });
    advance(1000);
    expect(g.admit(10).ok).toBe(true);
  });

  it('counts bytes: big frames exhaust the byte budget long before the request count', () => {
    const { g } = guard({ burst: 100, burst_bytes: 2 * 1024 * 1024, bytes_per_minute: 2 * 1024 * 1024 });
    const results = Array.from({ length: 6 }, () => {
      const r = g.admit(500_000);
      if (r.ok) g.settled();
      return r.ok;
    });
    expect(results).toEqual([true, true, true, true, false, false]);
  });

  it('refuses beyond max_in_flight until a reply settles', () => {
    const { g } = guard({ max_in_flight: 2 });
    expect(g.admit(1).ok).toBe(true);
    expect(g.admit(1).ok).toBe(true);
    expect(g.admit(1)).toMatchObject({ ok: false, why: 'in_flight' });
    g.settled();
    expect(g.admit(1).ok).toBe(true);
    expect(g.figures.inFlight).toBe(2);
  });

  it('trips once on sustained refusals; big refused frames weigh more', () => {
    const small = guard({ burst: 1, requests_per_minute: 1, refusals_per_minute: 10 });
    small.g.admit(1);
    for (let i = 0; i < 10; i++) small.g.admit(1);
    expect(small.trips).toEqual([]);
    small.g.admit(1);
    small.g.admit(1);
    expect(small.trips.map((t) => t.kind)).toEqual(['request_flood']);
    const big = guard({ burst: 1, requests_per_minute: 1, refusals_per_minute: 10 });
    big.g.admit(1);
    big.g.admit(5 * 64 * 1024);
    expect(big.trips).toEqual([]);
    big.g.admit(6 * 64 * 1024);
    expect(big.trips.map((t) => t.kind)).toEqual(['request_flood']);
  });

  it('trips on one connection past the bound, and on a stalled reply, at most once in all', () => {
    const { g, trips } = guard({ max_connections: 2 });
    g.connected();
    g.connected();
    g.disconnected();
    g.connected();
    expect(trips).toEqual([]);
    g.connected();
    g.replyStalled();
    expect(trips.map((t) => t.kind)).toEqual(['connection_flood']);
    expect(g.tripped?.kind).toBe('connection_flood');
  });
});
