// Per-session write budgets (specification: 20 stores, 5 supersedes, 5 deletes). They bound
// what one prompt-injected session can do to a group's memory: flood it, rewrite it or erase
// it. Counted per session id (the envelope's source), in memory: a plugin host restart
// starts the count afresh. Only successful operations use budget.

export const SESSION_LIMITS = { store: 20, supersede: 5, delete: 5 } as const;
export type LimitKind = keyof typeof SESSION_LIMITS;

/** Sessions remembered at once; the oldest are forgotten first. */
const MAX_SESSIONS = 10_000;

export class SessionLimits {
  private readonly used = new Map<string, Record<LimitKind, number>>();

  constructor(private readonly limits: Readonly<Record<LimitKind, number>> = SESSION_LIMITS) {}

  limit(kind: LimitKind): number {
    return this.limits[kind];
  }

  usedBy(session: string, kind: LimitKind): number {
    return this.used.get(session)?.[kind] ?? 0;
  }

  /** True while the session may still do one more of each kind given. */
  allows(session: string, ...kinds: LimitKind[]): boolean {
    return this.exhausted(session, ...kinds) === null;
  }

  /** The first of `kinds` the session has used up, if any. */
  exhausted(session: string, ...kinds: LimitKind[]): LimitKind | null {
    return kinds.find((kind) => this.usedBy(session, kind) >= this.limits[kind]) ?? null;
  }

  consume(session: string, ...kinds: LimitKind[]): void {
    let counts = this.used.get(session);
    if (!counts) {
      counts = { store: 0, supersede: 0, delete: 0 };
      this.used.set(session, counts);
      if (this.used.size > MAX_SESSIONS) this.used.delete(this.used.keys().next().value as string);
    }
    for (const kind of kinds) counts[kind]++;
  }
}
