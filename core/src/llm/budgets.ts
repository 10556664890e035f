// Per-group model budgets: tokens per UTC day (persisted in the usage store) and
// requests per minute (a fixed one-minute window in memory: a restart takes longer than
// the window is worth). A group over either is refused until the window turns; the first
// refusal of a window is flagged so the proxy tells the user once.
import type { LlmBudget } from '../config.js';
import type { DayUsage, UsageStore } from './usage-store.js';

export interface BudgetSettings {
  budget: LlmBudget;
  group_budgets: Record<string, Partial<LlmBudget>>;
}

export type BudgetKind = 'tokens_per_day' | 'requests_per_minute';

export type Admission =
  | { ok: true }
  | { ok: false; kind: BudgetKind; message: string; retryAfterSeconds: number; /** The first refusal of this group, kind and window. */ first: boolean };

export interface GroupUsage {
  group: string;
  day: string;
  input_tokens: number;
  output_tokens: number;
  tokens: number;
  requests: number;
  tokens_per_day: number;
  requests_per_minute: number;
  requests_this_minute: number;
  /** Held by requests in flight (their worst case) until they are settled. */
  reserved_tokens: number;
}

const DAY_MS = 86_400_000;

/** Tokens held for a request in flight until it is settled with what it really cost. */
export interface Reservation {
  /** The real cost; null when the upstream never said (the whole reservation is charged). Once. */
  settle(used: { input: number; output: number } | null): void;
}

export class Budgets {
  private readonly minutes = new Map<string, { minute: number; count: number }>();
  /** Tokens reserved by requests in flight, per group. */
  private readonly reserved = new Map<string, number>();

  constructor(
    private readonly settings: BudgetSettings,
    private readonly store: UsageStore,
    /** Hears a failed write to the store; the budget still holds for this run. */
    private readonly onStoreError: (err: Error) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  limits(group: string): LlmBudget {
    return { ...this.settings.budget, ...this.settings.group_budgets[group] };
  }

  /** Counts a request against the group's budgets, or refuses it. */
  admit(group: string): Admission {
    const now = this.now();
    const limits = this.limits(group);
    const day = dayOf(now);
    const used = this.store.get(group, day);
    if (used.input_tokens + used.output_tokens >= limits.tokens_per_day) {
      const retryAfterSeconds = Math.ceil((DAY_MS - (now % DAY_MS)) / 1000);
      return {
        ok: false,
        kind: 'tokens_per_day',
        message: `Carapace: the group "${group}" has used its model budget for today (${limits.tokens_per_day} tokens); it renews at 00:00 UTC`,
        retryAfterSeconds,
        first: this.firstNotice(group, day, 'tokens_per_day'),
      };
    }
    const minute = Math.floor(now / 60_000);
    const window = this.minutes.get(group);
    const count = window?.minute === minute ? window.count : 0;
    if (count >= limits.requests_per_minute) {
      return {
        ok: false,
        kind: 'requests_per_minute',
        message: `Carapace: the group "${group}" has made its ${limits.requests_per_minute} model requests this minute; try again in a minute`,
        retryAfterSeconds: 60 - Math.floor((now % 60_000) / 1000),
        // Told once a day, not once a minute: a looping agent would otherwise flood the chat.
        first: this.firstNotice(group, day, 'requests_per_minute'),
      };
    }
    this.minutes.set(group, { minute, count: count + 1 });
    this.write(() => this.store.countRequest(group, day));
    return { ok: true };
  }

  /**
   * Holds `worstCase` tokens of the group's day for a request (its input and max_tokens),
   * or refuses it when what is used, what other requests in flight hold and this would
   * pass the day's budget: budgets are worst-case, so parallel requests cannot overshoot.
   */
  reserve(group: string, worstCase: number): (Reservation & { ok: true }) | Extract<Admission, { ok: false }> {
    const now = this.now();
    const limits = this.limits(group);
    const day = dayOf(now);
    const used = this.store.get(group, day);
    const held = this.reserved.get(group) ?? 0;
    const left = limits.tokens_per_day - used.input_tokens - used.output_tokens - held;
    if (worstCase > left) {
      return {
        ok: false,
        kind: 'tokens_per_day',
        message: `Carapace: the group "${group}" has ${Math.max(0, left)} of its ${limits.tokens_per_day} model tokens left today, less than this request may use (${worstCase}); it renews at 00:00 UTC`,
        retryAfterSeconds: Math.ceil((DAY_MS - (now % DAY_MS)) / 1000),
        first: this.firstNotice(group, day, 'tokens_per_day'),
      };
    }
    this.reserved.set(group, held + worstCase);
    let settled = false;
    return {
      ok: true,
      settle: (cost) => {
        if (settled) return;
        settled = true;
        const now = (this.reserved.get(group) ?? worstCase) - worstCase;
        if (now > 0) this.reserved.set(group, now);
        else this.reserved.delete(group);
        this.record(group, cost?.input ?? worstCase, cost?.output ?? 0);
      },
    };
  }

  /** Adds a finished request's tokens to the group's day. */
  record(group: string, inputTokens: number, outputTokens: number): void {
    if (inputTokens <= 0 && outputTokens <= 0) return;
    this.write(() => this.store.addTokens(group, dayOf(this.now()), inputTokens, outputTokens));
  }

  /** Today's usage of every group that used the model, and of `groups` besides. */
  report(groups: string[] = []): GroupUsage[] {
    const now = this.now();
    const day = dayOf(now);
    const rows = new Map<string, DayUsage>(this.store.day(day).map((row) => [row.group, row]));
    for (const group of groups) if (!rows.has(group)) rows.set(group, { group, day, input_tokens: 0, output_tokens: 0, requests: 0 });
    const minute = Math.floor(now / 60_000);
    return [...rows.values()]
      .sort((a, b) => a.group.localeCompare(b.group))
      .map((row) => {
        const window = this.minutes.get(row.group);
        return { ...row, tokens: row.input_tokens + row.output_tokens, reserved_tokens: this.reserved.get(row.group) ?? 0, ...this.limits(row.group), requests_this_minute: window?.minute === minute ? window.count : 0 };
      });
  }

  private firstNotice(group: string, window: string, kind: BudgetKind): boolean {
    try {
      return this.store.firstNotice(group, window, kind);
    } catch (err) {
      this.onStoreError(err as Error);
      return false;
    }
  }

  private write(action: () => void): void {
    try {
      action();
    } catch (err) {
      this.onStoreError(err as Error);
    }
  }
}

/** The UTC day a budget window is named by. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
