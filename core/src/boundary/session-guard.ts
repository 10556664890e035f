// What one session may cost the core. Every frame that arrives on a session socket, valid
// or not, is admitted here before any parsing: token buckets of requests and of request
// bytes, a bound on requests in flight, a count of connections, and a bucket of refusals.
// A session that keeps being refused, holds too many connections or does not read its
// replies has shown it is not a legitimate agent: the guard trips once and the core
// quarantines it.
import type { SessionLimits } from '../config.js';

/** Refused bytes are counted as refusals, one per this many bytes started. */
const REFUSAL_UNIT_BYTES = 64 * 1024;

export type AbuseKind = 'request_flood' | 'connection_flood' | 'unread_replies';

export interface Abuse {
  /** The guard's own kinds; other bounds (an LLM budget, ...) may quarantine with theirs. */
  kind: AbuseKind | (string & {});
  detail: string;
}

export type Admission = { ok: true } | { ok: false; retryAfter: number; why: 'rate' | 'in_flight' };

/** A continuously refilled bucket; `take` reports whether a token was there. */
class Bucket {
  private tokens: number;
  private updated: number;

  constructor(
    private readonly capacity: number,
    private readonly perMs: number,
    now: number,
  ) {
    this.tokens = capacity;
    this.updated = now;
  }

  take(now: number, n = 1): boolean {
    this.tokens = Math.min(this.capacity, this.tokens + (now - this.updated) * this.perMs);
    this.updated = now;
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }

  /** Seconds until `n` tokens exist again. */
  wait(n = 1): number {
    return Math.max(1, Math.ceil((n - this.tokens) / this.perMs / 1000));
  }
}

export class SessionGuard {
  private readonly requests: Bucket;
  private readonly bytes: Bucket;
  private readonly refusals: Bucket;
  private inFlight = 0;
  private connections = 0;
  private abuse: Abuse | null = null;

  /** @param onAbuse called at most once, when the first abuse threshold is crossed. */
  constructor(
    readonly limits: SessionLimits,
    private readonly onAbuse: (abuse: Abuse) => void,
    private readonly now: () => number = Date.now,
  ) {
    const t = now();
    this.requests = new Bucket(limits.burst, limits.requests_per_minute / 60_000, t);
    this.bytes = new Bucket(limits.burst_bytes, limits.bytes_per_minute / 60_000, t);
    this.refusals = new Bucket(limits.refusals_per_minute, limits.refusals_per_minute / 60_000, t);
  }

  /** Whether the guard has tripped: nothing from this session is processed any more. */
  get tripped(): Abuse | null {
    return this.abuse;
  }

  get figures(): { inFlight: number; connections: number } {
    return { inFlight: this.inFlight, connections: this.connections };
  }

  /**
   * One frame arrived. Admitted frames are in flight until `settled`; a refusal is
   * answered (cheaply) but is also a strike, and enough strikes quarantine.
   */
  admit(frameBytes: number): Admission {
    const t = this.now();
    // Counted whatever the frame holds: libzmq already bounds its size (see session-socket.ts).
    const size = Math.min(frameBytes, this.limits.burst_bytes);
    let refusal: Admission | null = null;
    if (!this.requests.take(t)) refusal = { ok: false, retryAfter: this.requests.wait(), why: 'rate' };
    else if (!this.bytes.take(t, size)) refusal = { ok: false, retryAfter: this.bytes.wait(size), why: 'rate' };
    else if (this.inFlight >= this.limits.max_in_flight) refusal = { ok: false, retryAfter: 1, why: 'in_flight' };
    if (refusal === null) {
      this.inFlight++;
      return { ok: true };
    }
    // A big refused frame has cost the core more than a small one: one strike per 64 KiB started.
    if (!this.refusals.take(t, Math.min(Math.ceil(Math.max(1, frameBytes) / REFUSAL_UNIT_BYTES), this.limits.refusals_per_minute))) {
      this.trip('request_flood', `more than ${this.limits.refusals_per_minute} refused requests in a minute (limits: ${this.limits.requests_per_minute}/min, burst ${this.limits.burst}; ${this.limits.bytes_per_minute} bytes/min, burst ${this.limits.burst_bytes}; ${this.limits.max_in_flight} in flight)`);
    }
    return refusal;
  }

  /** An admitted request's reply was handed to the socket (or could not be). */
  settled(): void {
    if (this.inFlight > 0) this.inFlight--;
  }

  connected(): void {
    this.connections++;
    if (this.connections > this.limits.max_connections) {
      this.trip('connection_flood', `more than ${this.limits.max_connections} simultaneous connections to the session socket`);
    }
  }

  disconnected(): void {
    if (this.connections > 0) this.connections--;
  }

  /** A reply could not be queued within reply_timeout_ms: the peer is not reading. */
  replyStalled(): void {
    this.trip('unread_replies', `a reply could not be delivered for ${this.limits.reply_timeout_ms} ms: the peer does not read its replies`);
  }

  private trip(kind: AbuseKind, detail: string): void {
    if (this.abuse) return;
    this.abuse = { kind, detail };
    this.onAbuse(this.abuse);
  }
}

/** The one message the user gets on the group's channel when a session is quarantined. */
export function quarantineNotice(abuse: Abuse): string {
  const what: Record<string, string> = {
    request_flood: 'flooded Carapace with requests',
    connection_flood: 'opened too many connections to Carapace',
    unread_replies: 'stopped reading the answers Carapace sent it',
  };
  const why = Object.hasOwn(what, abuse.kind) ? `it ${what[abuse.kind]}, which a working agent never does` : `it went past one of its limits (${abuse.kind})`;
  return `Carapace stopped this chat's agent: ${why}. Its session is closed for good; your next message starts a fresh agent.`;
}
