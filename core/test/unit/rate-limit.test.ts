import { describe, it, expect } from '@jest/globals';
import { RateLimiter, type RateDecision } from '../../src/pipeline/rate-limit.js';

function denied(d: RateDecision): { retryAfter: number; limit: { per_minute: number; burst: number } } {
  if (d.ok) throw new Error('expected the request to be rate limited');
  return d;
}

describe('RateLimiter', () => {
  const T0 = 1_700_000_000_000;

  it('allows the burst, then rate limits with retryAfter from the refill rate', () => {
    // 60 per minute = one token per second.
    const limiter = new RateLimiter({ per_minute: 60, burst: 3 });
    for (let i = 0; i < 3; i++) expect(limiter.check('s1', 'echo', T0)).toEqual({ ok: true });
    const d = denied(limiter.check('s1', 'echo', T0));
    expect(d.retryAfter).toBe(1);
    expect(d.limit).toEqual({ per_minute: 60, burst: 3 });
  });

  it('computes retryAfter in whole seconds, rounded up, from the refill rate', () => {
    // 6 per minute = one token every 10 s.
    const limiter = new RateLimiter({ per_minute: 6, burst: 1 });
    expect(limiter.check('s', 't', T0).ok).toBe(true);
    expect(denied(limiter.check('s', 't', T0)).retryAfter).toBe(10);
    // 4.5 s later, 0.45 token exists; 5.5 s still to wait, rounded up to 6.
    expect(denied(limiter.check('s', 't', T0 + 4_500)).retryAfter).toBe(6);
    // 9.5 s later: 0.5 s left, rounds up to 1 s (never 0).
    expect(denied(limiter.check('s', 't', T0 + 9_500)).retryAfter).toBe(1);
  });

  it('retryAfter is at least 1 even when almost a full token has accrued', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 1 });
    limiter.check('s', 't', T0);
    const d = denied(limiter.check('s', 't', T0 + 999));
    expect(d.retryAfter).toBeGreaterThanOrEqual(1);
    expect(d.retryAfter).toBe(1);
  });

  it('a rejected check does not consume tokens', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 1 });
    limiter.check('s', 't', T0);
    for (let i = 0; i < 5; i++) expect(limiter.check('s', 't', T0 + 100 * i).ok).toBe(false);
    expect(limiter.check('s', 't', T0 + 1_000).ok).toBe(true);
  });

  it('refills continuously over time', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 2 });
    expect(limiter.check('s', 't', T0).ok).toBe(true);
    expect(limiter.check('s', 't', T0).ok).toBe(true);
    expect(limiter.check('s', 't', T0).ok).toBe(false);
    expect(limiter.check('s', 't', T0 + 500).ok).toBe(false);
    expect(limiter.check('s', 't', T0 + 1_000).ok).toBe(true);
    expect(limiter.check('s', 't', T0 + 1_000).ok).toBe(false);
  });

  it('never refills beyond the burst', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 2 });
    limiter.check('s', 't', T0);
    // An hour of idleness still leaves only `burst` tokens.
    const later = T0 + 3_600_000;
    expect(limiter.check('s', 't', later).ok).toBe(true);
    expect(limiter.check('s', 't', later).ok).toBe(true);
    expect(limiter.check('s', 't', later).ok).toBe(false);
  });

  it('applies a per-tool override instead of the defaults', () => {
    const limiter = new RateLimiter({ per_minute: 120, burst: 30 }, { slow_tool: { per_minute: 1, burst: 1 } });
    expect(limiter.check('s', 'slow_tool', T0).ok).toBe(true);
    const d = denied(limiter.check('s', 'slow_tool', T0));
    expect(d.limit).toEqual({ per_minute: 1, burst: 1 });
    expect(d.retryAfter).toBe(60);
    // Other tools keep the default budget.
    for (let i = 0; i < 30; i++) expect(limiter.check('s', 'other', T0).ok).toBe(true);
    expect(denied(limiter.check('s', 'other', T0)).limit).toEqual({ per_minute: 120, burst: 30 });
  });

  it('keeps buckets independent per session', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 1 });
    expect(limiter.check('a', 't', T0).ok).toBe(true);
    expect(limiter.check('a', 't', T0).ok).toBe(false);
    expect(limiter.check('b', 't', T0).ok).toBe(true);
  });

  it('keeps buckets independent per tool', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 1 });
    expect(limiter.check('a', 't1', T0).ok).toBe(true);
    expect(limiter.check('a', 't1', T0).ok).toBe(false);
    expect(limiter.check('a', 't2', T0).ok).toBe(true);
  });

  it('forgetSession resets only that session’s buckets', () => {
    const limiter = new RateLimiter({ per_minute: 60, burst: 1 });
    limiter.check('a', 't1', T0);
    limiter.check('a', 't2', T0);
    limiter.check('ab', 't1', T0);
    limiter.forgetSession('a');
    expect(limiter.check('a', 't1', T0).ok).toBe(true);
    expect(limiter.check('a', 't2', T0).ok).toBe(true);
    // "ab" shares a prefix with "a" but is another session: still exhausted.
    expect(limiter.check('ab', 't1', T0).ok).toBe(false);
  });

  it('a tool whose name is an Object.prototype member ("constructor") gets the default limit', () => {
    // "constructor" matches the tool-name pattern ^[a-z][a-z0-9_]{0,63}$.
    const limiter = new RateLimiter({ per_minute: 60, burst: 2 }, {});
    expect(limiter.check('s', 'constructor', T0)).toEqual({ ok: true });
    expect(limiter.check('s', 'constructor', T0)).toEqual({ ok: true });
    const d = denied(limiter.check('s', 'constructor', T0));
    expect(d.retryAfter).toBe(1);
    expect(d.limit).toEqual({ per_minute: 60, burst: 2 });
  });
});
