// Stage 5's waiting room: high-risk requests are held here until a person answers on
// the dashboard, the CLI or the group's channel. Nothing here survives a restart:
// a stopping core withdraws everything still pending. At most `maxPerGroup` wait at once
// per group: more are refused before they reach a person (approval fatigue, floods).
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { stateHash, type CallState } from './call-state.js';
import { describeCall, type CallDescription } from './describe-call.js';

/** withdrawn: the caller went away or the core is stopping; nothing runs. */
export type Decision = 'approved' | 'denied' | 'timeout' | 'withdrawn';

export interface PendingConfirmation {
  id: string;
  group: string;
  session: string;
  tool: string;
  correlation: string;
  arguments: Record<string, unknown>;
  requested_at: string;
  expires_at: string;
  /** What the person is shown (escaped, bounded, with warnings); answers bind to its hash. */
  description: CallDescription;
  /** call-state.ts's hash of what the plugin said the call refers to (a standing approval keeps it). */
  state_hash: string | null;
}

interface Waiting {
  pending: PendingConfirmation;
  settle: (decision: Decision, by: string) => void;
}

/** How many ended confirmations are remembered for `status` (a restart forgets them all). */
const ENDED_REMEMBERED = 1000;

/** What became of a confirmation, as far as this run of the core knows. */
export type ConfirmationStatus =
  | { state: 'pending'; group: string }
  | { state: 'ended'; group: string; decision: Decision; by: string }
  /** Not asked by this run: the core restarted since (or it is long gone); nothing of it can run. */
  | { state: 'unknown' };

export interface ConfirmationEvents {
  requested: [PendingConfirmation];
  resolved: [PendingConfirmation, Decision, string];
}

export class Confirmations extends EventEmitter<ConfirmationEvents> {
  private readonly waiting = new Map<string, Waiting>();
  /** Outcomes of this run's confirmations, newest last, bounded: a late press hears the truth. */
  private readonly ended = new Map<string, { group: string; decision: Decision; by: string }>();

  constructor(
    readonly timeoutMs: number,
    private readonly maxPerGroup = Number.POSITIVE_INFINITY,
  ) {
    super();
  }

  /** null when the group already has `maxPerGroup` confirmations waiting. `state`: what the plugin says the call refers to. */
  request(input: Omit<PendingConfirmation, 'id' | 'requested_at' | 'expires_at' | 'description' | 'state_hash'>, state: CallState | null = null): {
    pending: PendingConfirmation;
    answer: Promise<{ decision: Decision; by: string }>;
  } | null {
    if (this.list(input.group).length >= this.maxPerGroup) return null;
    const now = Date.now();
    const pending: PendingConfirmation = {
      ...input,
      id: randomUUID(),
      requested_at: new Date(now).toISOString(),
      expires_at: new Date(now + this.timeoutMs).toISOString(),
      description: describeCall(input.tool, input.group, input.arguments, state),
      state_hash: stateHash(state),
    };
    const answer = new Promise<{ decision: Decision; by: string }>((resolve) => {
      const timer = setTimeout(() => settle('timeout', 'core'), this.timeoutMs);
      const settle = (decision: Decision, by: string): void => {
        if (!this.waiting.delete(pending.id)) return;
        clearTimeout(timer);
        this.ended.set(pending.id, { group: pending.group, decision, by });
        if (this.ended.size > ENDED_REMEMBERED) this.ended.delete(this.ended.keys().next().value as string);
        this.emit('resolved', pending, decision, by);
        resolve({ decision, by });
      };
      this.waiting.set(pending.id, { pending, settle });
    });
    this.emit('requested', pending);
    return { pending, answer };
  }

  list(group?: string): PendingConfirmation[] {
    return [...this.waiting.values()].map((w) => w.pending).filter((p) => group === undefined || p.group === group);
  }

  get(id: string): PendingConfirmation | undefined {
    return this.waiting.get(id)?.pending;
  }

  /** Pending, ended (how and by whom), or unknown to this run of the core. */
  status(id: string): ConfirmationStatus {
    const waiting = this.waiting.get(id);
    if (waiting) return { state: 'pending', group: waiting.pending.group };
    const ended = this.ended.get(id);
    return ended ? { state: 'ended', ...ended } : { state: 'unknown' };
  }

  /**
   * Returns false when there is no such pending confirmation (answered, expired, unknown),
   * and 'stale' (nothing decided) when `hash` is given and is not (a prefix of at least 8
   * hex digits of) the hash of what this confirmation shows.
   */
  resolve(id: string, approve: boolean, by: string, hash?: string): boolean | 'stale' {
    const waiting = this.waiting.get(id);
    if (!waiting) return false;
    if (hash !== undefined && !hashMatches(waiting.pending.description.hash, hash)) return 'stale';
    waiting.settle(approve ? 'approved' : 'denied', by);
    return true;
  }

  denyAll(by: string): void {
    for (const waiting of [...this.waiting.values()]) waiting.settle('denied', by);
  }

  /** The caller is gone (or the core is stopping): nothing will run. */
  withdraw(id: string, by: string): boolean {
    const waiting = this.waiting.get(id);
    if (!waiting) return false;
    waiting.settle('withdrawn', by);
    return true;
  }

  withdrawSession(session: string, by: string): void {
    for (const waiting of [...this.waiting.values()]) if (waiting.pending.session === session) waiting.settle('withdrawn', by);
  }

  withdrawAll(by: string): void {
    for (const waiting of [...this.waiting.values()]) waiting.settle('withdrawn', by);
  }
}

/** `given` is the whole hash or a prefix of it (at least 8 hex digits, as a Telegram button carries). */
export function hashMatches(hash: string, given: string): boolean {
  return /^[0-9a-f]{8,64}$/.test(given) && hash.startsWith(given);
}
