// Stage 4b: a token bucket per session per tool. Refill is continuous, so retry_after
// is the honest wait until one more token exists.
import type { RateLimit } from '../config.js';

interface Bucket {
  tokens: number;
  updated: number;
}

export type RateDecision = { ok: true } | { ok: false; retryAfter: number; limit: RateLimit };

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private defaults: RateLimit,
    private perTool: Record<string, RateLimit> = {},
  ) {}

  /** New limits from a changed carapace.json: each bucket keeps its tokens, capped at the new burst when next checked. */
  setLimits(defaults: RateLimit, perTool: Record<string, RateLimit>): void {
    this.defaults = defaults;
    this.perTool = perTool;
  }

  check(session: string, tool: string, nowMs = Date.now()): RateDecision {
    const limit = Object.hasOwn(this.perTool, tool) ? this.perTool[tool] : this.defaults;
    const perMs = limit.per_minute / 60_000;
    const key = `${session}\u0000${tool}`;
    const bucket = this.buckets.get(key) ?? { tokens: limit.burst, updated: nowMs };
    bucket.tokens = Math.min(limit.burst, bucket.tokens + (nowMs - bucket.updated) * perMs);
    bucket.updated = nowMs;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfter: Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000)), limit };
  }

  forgetSession(session: string): void {
    const prefix = `${session}\u0000`;
    for (const key of this.buckets.keys()) if (key.startsWith(prefix)) this.buckets.delete(key);
  }
}
