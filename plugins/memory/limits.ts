// Per-session write budgets (specification: 20 stores, 5 supersedes, 5 deletes), counted
// in any hour: they bound what one prompt-injected session can do to a group's memory
// (flood it, rewrite it or erase it), and a group whose session never ends (it is never
// idle for long) gets them back as the hour moves on, not never. Counted per session id
// (the envelope's source), in memory: a plugin host restart starts the count afresh. Only
// successful operations use budget.

export const SESSION_LIMITS = { store: 20, supersede: 5, delete: 5 } as const;
export type LimitKind = keyof typeof SESSION_LIMITS;

const HOUR_MS = 3_600_000;
/** Sessions remembered at once; the oldest are forgotten first. */
const MAX_SESSIONS = 10_000;

export class SessionLimits {
  /** When each kind was used by each session, within the last hour. */
  private readonly used = new Map<string, Record<LimitKind, number[]>>();

  constructor(
    private readonly limits: Readonly<Record<LimitKind, number>> = SESSION_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  limit(kind: LimitKind): number {
    return this.limits[kind];
  }

  usedBy(session: string, kind: LimitKind): number {
    return this.recent(session, kind).length;
  }

  /** True while the session may still do one more of each kind given. */
  allows(session: string, ...kinds: LimitKind[]): boolean {
    return this.exhausted(session, ...kinds) === null;
  }

  /** The first of `kinds` the session has used up this hour, if any. */
  exhausted(session: string, ...kinds: LimitKind[]): LimitKind | null {
    return kinds.find((kind) => this.usedBy(session, kind) >= this.limits[kind]) ?? null;
  }

  /** When one more `kind` becomes possible again (ms since the epoch). */
  freesAt(session: string, kind: LimitKind): number {
    const times = this.recent(session, kind);
    return (times[times.length - this.limits[kind]] ?? this.now()) + HOUR_MS;
  }

  consume(session: string, ...kinds: LimitKind[]): void {
    let times = this.used.get(session);
    if (!times) {
      times = { store: [], supersede: [], delete: [] };
      this.used.set(session, times);
      if (this.used.size > MAX_SESSIONS) this.used.delete(this.used.keys().next().value as string);
    }
    for (const kind of kinds) times[kind].push(this.now());
  }

  private recent(session: string, kind: LimitKind): number[] {
    const times = this.used.get(session);
    if (!times) return [];
    const since = this.now() - HOUR_MS;
    while (times[kind].length > 0 && times[kind][0] <= since) times[kind].shift();
    return times[kind];
  }
}
