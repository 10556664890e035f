// High-risk calls waiting for a person, and the callers waiting on them.
//
// - A retry of the same tool with the same arguments from the same session joins the
//   call already waiting: one prompt, one action, every caller gets the same answer.
// - A resend after a reconnect (same correlation, new ZeroMQ identity) adds that
//   identity as another caller.
// - Each caller is told the call is pending (an interim frame its `ipc` understands:
//   it moves its deadline to the confirmation's expiry plus the handler timeout), and
//   told again every `keepaliveMs`. The ROUTER is `mandatory`: a send to an identity
//   whose connection is gone fails, so when no caller can be reached the confirmation
//   is withdrawn and nothing runs.
import type { Answer } from '../response/respond.js';

export type Send = (frame: string) => Promise<void>;

export interface Caller {
  correlation: string;
  send: Send;
}

interface Call {
  answer: Promise<Answer>;
  callers: Set<Caller>;
  /** Set once a confirmation waits: what the interim frame says. */
  pending?: { id: string; expiresAt: number };
}

export class WaitingCalls {
  private readonly byJoinKey = new Map<string, Call>();
  private readonly byRequest = new Map<string, Call>();

  constructor(
    private readonly handlerTimeoutMs: number,
    readonly keepaliveMs = 10_000,
  ) {}

  /** The key a retry must match to join: session, tool and exact arguments. */
  static joinKey(session: string, tool: string, args: unknown): string {
    return JSON.stringify([session, tool, canonical(args)]);
  }

  /** A call already waiting with this key, joined by `caller`; or undefined. */
  join(joinKey: string, requestKey: string, caller: Caller): Promise<Answer> | undefined {
    const call = this.byJoinKey.get(joinKey);
    if (!call) return undefined;
    this.addCaller(call, requestKey, caller);
    return call.answer;
  }

  /** A resend of a request already waiting (same correlation) from a new connection. */
  rejoin(requestKey: string, caller: Caller): void {
    const call = this.byRequest.get(requestKey);
    if (call) this.addCaller(call, requestKey, caller);
  }

  /** Runs `work` as the call for `joinKey`; `work` reports when it starts waiting for a person. */
  run(joinKey: string, requestKey: string, caller: Caller, work: (call: CallHandle) => Promise<Answer>): Promise<Answer> {
    const call: Call = { answer: Promise.resolve(null as never), callers: new Set() };
    this.byJoinKey.set(joinKey, call);
    this.addCaller(call, requestKey, caller);
    const handle: CallHandle = {
      pending: (id, expiresAt) => {
        call.pending = { id, expiresAt };
        void this.tell(call);
      },
      keepalive: () => this.tell(call),
    };
    call.answer = work(handle).finally(() => {
      if (this.byJoinKey.get(joinKey) === call) this.byJoinKey.delete(joinKey);
      for (const [key, c] of this.byRequest) if (c === call) this.byRequest.delete(key);
    });
    return call.answer;
  }

  private addCaller(call: Call, requestKey: string, caller: Caller): void {
    call.callers.add(caller);
    this.byRequest.set(requestKey, call);
    if (call.pending) void this.send(call, caller);
  }

  /** Tells every caller the call is still pending; returns how many could be reached. */
  private async tell(call: Call): Promise<number> {
    const reached = await Promise.all([...call.callers].map((c) => this.send(call, c)));
    return reached.filter(Boolean).length;
  }

  private async send(call: Call, caller: Caller): Promise<boolean> {
    if (!call.pending) return true;
    const waitMs = Math.max(0, call.pending.expiresAt - Date.now()) + this.handlerTimeoutMs;
    const frame = JSON.stringify({ correlation: caller.correlation, pending: { confirmation: call.pending.id, wait_ms: waitMs } });
    // A send to a peer that is gone either fails (EHOSTUNREACH) or, seen with a killed
    // ipc, never completes: both mean this caller can no longer be reached.
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.keepaliveMs)));
    const sent = caller.send(frame).then(
      () => true,
      () => false,
    );
    const reached = await Promise.race([sent, stuck]).finally(() => clearTimeout(timer));
    if (!reached) call.callers.delete(caller);
    return reached;
  }
}

export interface CallHandle {
  /** The call now waits for confirmation `id`: tell the callers. */
  pending(id: string, expiresAt: number): void;
  /** Tells the callers again; resolves to how many could be reached (0: all gone). */
  keepalive(): Promise<number>;
}

/** JSON with object keys sorted, so {"a":1,"b":2} and {"b":2,"a":1} join. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]));
  }
  return value;
}
