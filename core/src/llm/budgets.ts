// Per-group model budgets: tokens per UTC day (persisted in the usage store) and
// requests per minute (a fixed one-minute window in memory: a restart takes longer than
// the window is worth). A group over either is refused until the window turns; the first
// refusal of a window is flagged so the proxy tells the user once.
import type { ApplianceBudget, LlmBudget } from '../config.js';
import type { DayUsage, UsageStore } from './usage-store.js';

export interface BudgetSettings {
  budget: LlmBudget;
  group_budgets: Record<string, Partial<LlmBudget>>;
  appliance_budget?: ApplianceBudget;
  notice_at_percent?: number;
}

/** One token budget a request counts against: the group's or the appliance's, per day or month. */
interface TokenWindow {
  who: string;
  per: 'day' | 'month';
  /** Names the window for once-only notices (the UTC day or month). */
  window: string;
  limit: number;
  used: number;
  held: number;
}

export type Admission =
  | { ok: true }
  | { ok: false; message: string; retryAfterSeconds: number; /** The first refusal of this group, kind and window. */ first: boolean };

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
const MAX_NOTICED = 10_000;

/** Tokens held for a request in flight until it is settled with what it really cost. */
export interface Reservation {
  /** The real cost; null when the upstream never said (the whole reservation is charged). Once. */
  settle(used: { input: number; output: number } | null): void;
}

export class Budgets {
  private readonly minutes = new Map<string, { minute: number; count: number }>();
  /** Tokens reserved by requests in flight, per group. */
  private readonly reserved = new Map<string, number>();
  private reservedTotal = 0;
  /** Notices already decided (told or not), so that a busy group does not write to the store per request. */
  private readonly noticed = new Set<string>();

  constructor(
    private readonly settings: BudgetSettings,
    private readonly store: UsageStore,
    /** Hears a failed write to the store; the budget still holds for this run. */
    private readonly onStoreError: (err: Error) => void = () => undefined,
    private readonly now: () => number = Date.now,
    /** Tells a group's people something (a budget nearly used up). */
    private readonly notify: (group: string, text: string) => void = () => undefined,
  ) {}

  limits(group: string): LlmBudget {
    return { ...this.settings.budget, ...this.settings.group_budgets[group] };
  }

  /** Counts a request against the group's requests per minute, or refuses it (tokens: reserve). */
  admit(group: string): Admission {
    const now = this.now();
    const limits = this.limits(group);
    const day = dayOf(now);
    const minute = Math.floor(now / 60_000);
    const window = this.minutes.get(group);
    const count = window?.minute === minute ? window.count : 0;
    if (count >= limits.requests_per_minute) {
      return {
        ok: false,
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
    const windows = this.windows(group, now);
    const tightest = windows.reduce<TokenWindow | null>((min, w) => (min === null || w.limit - w.used - w.held < min.limit - min.used - min.held ? w : min), null);
    const left = tightest ? tightest.limit - tightest.used - tightest.held : Infinity;
    if (tightest && worstCase > left) {
      const whose = tightest.who === 'appliance' ? 'the appliance (all groups together)' : `the group "${group}"`;
      const renews = tightest.per === 'day' ? 'it renews at 00:00 UTC' : 'it renews on the 1st of the month (UTC)';
      return {
        ok: false,
        message: `Carapace: ${whose} has ${Math.max(0, left)} of its ${tightest.limit} model tokens left ${tightest.per === 'day' ? 'today' : 'this month'}, less than this request may use (${worstCase}); ${renews}`,
        retryAfterSeconds: tightest.per === 'day' ? Math.ceil((DAY_MS - (now % DAY_MS)) / 1000) : Math.ceil((nextMonth(now) - now) / 1000),
        first: this.firstNotice(tightest.who === 'appliance' ? '*' : group, tightest.window, `tokens_per_${tightest.per}`),
      };
    }
    this.reserved.set(group, (this.reserved.get(group) ?? 0) + worstCase);
    this.reservedTotal += worstCase;
    let settled = false;
    return {
      ok: true,
      settle: (cost) => {
        if (settled) return;
        settled = true;
        const held = (this.reserved.get(group) ?? worstCase) - worstCase;
        if (held > 0) this.reserved.set(group, held);
        else this.reserved.delete(group);
        this.reservedTotal -= worstCase;
        this.record(group, cost?.input ?? worstCase, cost?.output ?? 0);
        this.tellIfNearing(group);
      },
    };
  }

  /** Every token budget a request of `group` counts against, with what is used and held. */
  private windows(group: string, now: number): TokenWindow[] {
    const limits = this.limits(group);
    const appliance = this.settings.appliance_budget ?? {};
    const day = dayOf(now);
    const month = day.slice(0, 7);
    const today = this.store.day(day);
    const thisMonth = limits.tokens_per_month !== undefined || appliance.tokens_per_month !== undefined ? this.store.since(`${month}-01`) : [];
    const sum = (rows: DayUsage[]) => rows.reduce((n, r) => n + r.input_tokens + r.output_tokens, 0);
    const mine = (rows: DayUsage[]) => rows.filter((r) => r.group === group);
    const held = this.reserved.get(group) ?? 0;
    const all: (TokenWindow | null)[] = [
      { who: group, per: 'day', window: day, limit: limits.tokens_per_day, used: sum(mine(today)), held },
      limits.tokens_per_month !== undefined ? { who: group, per: 'month', window: month, limit: limits.tokens_per_month, used: sum(mine(thisMonth)), held } : null,
      appliance.tokens_per_day !== undefined ? { who: 'appliance', per: 'day', window: day, limit: appliance.tokens_per_day, used: sum(today), held: this.reservedTotal } : null,
      appliance.tokens_per_month !== undefined ? { who: 'appliance', per: 'month', window: month, limit: appliance.tokens_per_month, used: sum(thisMonth), held: this.reservedTotal } : null,
    ];
    return all.filter((w): w is TokenWindow => w !== null);
  }

  /** Past `notice_at_percent` of a budget: the group's people are told once per budget and window. */
  private tellIfNearing(group: string): void {
    const percent = this.settings.notice_at_percent ?? 80;
    for (const w of this.windows(group, this.now())) {
      if (w.limit <= 0 || w.used * 100 < w.limit * percent) continue;
      if (!this.firstNotice(w.who === 'appliance' ? '*' : group, w.window, `near_tokens_per_${w.per}`)) continue;
      const whose = w.who === 'appliance' ? 'the appliance (all groups together) has' : `the group "${group}" has`;
      this.notify(group, `Carapace: ${whose} used ${Math.floor((w.used * 100) / w.limit)}% of its model tokens for ${w.per === 'day' ? 'today' : 'this month'} (${w.used} of ${w.limit}).`);
    }
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

  /** True the first time for this group, window and kind, across restarts (the store) and without a write each time (memory). */
  private firstNotice(group: string, window: string, kind: string): boolean {
    const key = `${group}\n${window}\n${kind}`;
    if (this.noticed.has(key)) return false;
    if (this.noticed.size >= MAX_NOTICED) this.noticed.clear();
    this.noticed.add(key);
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

/** The start of the next UTC month. */
function nextMonth(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The UTC day a budget window is named by. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
