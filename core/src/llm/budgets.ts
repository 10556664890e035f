// Model budgets, per group and for the whole appliance: tokens and money per UTC day and
// month (persisted in the usage store), and requests per minute per group (a fixed
// one-minute window in memory: a restart takes longer than the window is worth). A request
// is admitted only if its worst case fits every budget it counts against; the first
// refusal and the first crossing of notice_at_percent of a window are flagged so that the
// group's people are told once.
import type { ApplianceBudget, LlmBudget } from '../config.js';
import { usd } from './prices.js';
import type { DayUsage, UsageStore } from './usage-store.js';

export interface BudgetSettings {
  budget: LlmBudget;
  group_budgets: Record<string, Partial<LlmBudget>>;
  appliance_budget?: ApplianceBudget;
  notice_at_percent?: number;
}

/** What a request may cost at most, or did cost: tokens (input and output) and µUSD. */
export interface Cost {
  tokens: number;
  micros: number;
}

/** What a finished request used, by the upstream's own figures. */
export interface Spent {
  input: number;
  output: number;
  micros: number;
}

/** One budget a request counts against: the group's or the appliance's, per day or month, in tokens or money. */
interface BudgetWindow {
  who: string;
  per: 'day' | 'month';
  unit: keyof Cost;
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
  /** What the day's requests cost, in µUSD. */
  cost_micros: number;
  /** Held by requests in flight (their worst case) until they are settled. */
  reserved_tokens: number;
  reserved_micros: number;
}

const DAY_MS = 86_400_000;
const MAX_NOTICED = 10_000;

/** What a request in flight holds until it is settled with what it really cost. */
export interface Reservation {
  /** The real cost; null when the upstream never said (the whole reservation is charged). Once. */
  settle(spent: Spent | null): void;
}

const NONE: Cost = { tokens: 0, micros: 0 };
const plus = (a: Cost, b: Cost, sign = 1): Cost => ({ tokens: a.tokens + sign * b.tokens, micros: a.micros + sign * b.micros });

export class Budgets {
  private readonly minutes = new Map<string, { minute: number; count: number }>();
  /** What requests in flight hold, per group and in all. */
  private readonly reserved = new Map<string, Cost>();
  private reservedTotal: Cost = NONE;
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
   * Holds a request's worst case (its input and max_tokens, in tokens and money) against
   * every budget it counts against, or refuses it when what is used, what other requests
   * in flight hold and this would pass one: parallel requests cannot overshoot.
   */
  reserve(group: string, worstCase: Cost): (Reservation & { ok: true }) | Extract<Admission, { ok: false }> {
    const now = this.now();
    const left = (w: BudgetWindow): number => w.limit - w.used - w.held;
    const short = this.windows(group, now).filter((w) => worstCase[w.unit] > left(w));
    const tightest = short.sort((a, b) => left(a) / Math.max(1, a.limit) - left(b) / Math.max(1, b.limit))[0];
    if (tightest) {
      const whose = tightest.who === 'appliance' ? 'the appliance (all groups together)' : `the group "${group}"`;
      const renews = tightest.per === 'day' ? 'it renews at 00:00 UTC' : 'it renews on the 1st of the month (UTC)';
      const amount = (n: number): string => (tightest.unit === 'micros' ? usd(n) : String(n));
      const what = tightest.unit === 'micros' ? 'model budget' : 'model tokens';
      return {
        ok: false,
        message: `Carapace: ${whose} has ${amount(Math.max(0, left(tightest)))} of its ${amount(tightest.limit)} ${what} left ${tightest.per === 'day' ? 'today' : 'this month'}, less than this request may use (${amount(worstCase[tightest.unit])}); ${renews}`,
        retryAfterSeconds: tightest.per === 'day' ? Math.ceil((DAY_MS - (now % DAY_MS)) / 1000) : Math.ceil((nextMonth(now) - now) / 1000),
        first: this.firstNotice(tightest.who === 'appliance' ? '*' : group, tightest.window, kindOf(tightest)),
      };
    }
    this.reserved.set(group, plus(this.reserved.get(group) ?? NONE, worstCase));
    this.reservedTotal = plus(this.reservedTotal, worstCase);
    let settled = false;
    return {
      ok: true,
      settle: (spent) => {
        if (settled) return;
        settled = true;
        const held = plus(this.reserved.get(group) ?? worstCase, worstCase, -1);
        if (held.tokens > 0 || held.micros > 0) this.reserved.set(group, held);
        else this.reserved.delete(group);
        this.reservedTotal = plus(this.reservedTotal, worstCase, -1);
        this.record(group, spent ?? { input: worstCase.tokens, output: 0, micros: worstCase.micros });
        this.tellIfNearing(group);
      },
    };
  }

  /** Every budget a request of `group` counts against, with what is used and held. */
  private windows(group: string, now: number): BudgetWindow[] {
    const limits = this.limits(group);
    const appliance = this.settings.appliance_budget ?? {};
    const day = dayOf(now);
    const month = day.slice(0, 7);
    const monthly = [limits.tokens_per_month, limits.usd_per_month, appliance.tokens_per_month, appliance.usd_per_month].some((n) => n !== undefined);
    const rows = { day: this.store.day(day), month: monthly ? this.store.since(`${month}-01`) : [] };
    const spent = (which: DayUsage[]): Cost => which.reduce((n, r) => ({ tokens: n.tokens + r.input_tokens + r.output_tokens, micros: n.micros + r.cost_micros }), NONE);
    const mine = { day: spent(rows.day.filter((r) => r.group === group)), month: spent(rows.month.filter((r) => r.group === group)) };
    const all = { day: spent(rows.day), month: spent(rows.month) };
    const held = this.reserved.get(group) ?? NONE;
    const windows: BudgetWindow[] = [];
    const add = (who: string, per: 'day' | 'month', unit: keyof Cost, limit: number | undefined): void => {
      if (limit === undefined) return;
      const used = who === 'appliance' ? all[per] : mine[per];
      windows.push({ who, per, unit, window: per === 'day' ? day : month, limit: unit === 'micros' ? Math.round(limit * 1_000_000) : limit, used: used[unit], held: (who === 'appliance' ? this.reservedTotal : held)[unit] });
    };
    add(group, 'day', 'tokens', limits.tokens_per_day);
    add(group, 'month', 'tokens', limits.tokens_per_month);
    add(group, 'day', 'micros', limits.usd_per_day);
    add(group, 'month', 'micros', limits.usd_per_month);
    add('appliance', 'day', 'tokens', appliance.tokens_per_day);
    add('appliance', 'month', 'tokens', appliance.tokens_per_month);
    add('appliance', 'day', 'micros', appliance.usd_per_day);
    add('appliance', 'month', 'micros', appliance.usd_per_month);
    return windows;
  }

  /** Past `notice_at_percent` of a budget: the group's people are told once per budget and window. */
  private tellIfNearing(group: string): void {
    const percent = this.settings.notice_at_percent ?? 80;
    for (const w of this.windows(group, this.now())) {
      if (w.limit <= 0 || w.used * 100 < w.limit * percent) continue;
      if (!this.firstNotice(w.who === 'appliance' ? '*' : group, w.window, `near_${kindOf(w)}`)) continue;
      const whose = w.who === 'appliance' ? 'the appliance (all groups together) has' : `the group "${group}" has`;
      const amount = (n: number): string => (w.unit === 'micros' ? usd(n) : String(n));
      this.notify(group, `Carapace: ${whose} used ${Math.floor((w.used * 100) / w.limit)}% of its ${w.unit === 'micros' ? 'model budget' : 'model tokens'} for ${w.per === 'day' ? 'today' : 'this month'} (${amount(w.used)} of ${amount(w.limit)}).`);
    }
  }

  /** Adds what a finished request used to the group's day. */
  record(group: string, spent: Spent): void {
    if (spent.input <= 0 && spent.output <= 0 && spent.micros <= 0) return;
    this.write(() => this.store.addUsage(group, dayOf(this.now()), spent));
  }

  /** Today's usage of every group that used the model, and of `groups` besides. */
  report(groups: string[] = []): GroupUsage[] {
    const now = this.now();
    const day = dayOf(now);
    const rows = new Map<string, DayUsage>(this.store.day(day).map((row) => [row.group, row]));
    for (const group of groups) if (!rows.has(group)) rows.set(group, { group, day, input_tokens: 0, output_tokens: 0, cost_micros: 0, unpriced_tokens: 0, requests: 0 });
    const minute = Math.floor(now / 60_000);
    return [...rows.values()]
      .sort((a, b) => a.group.localeCompare(b.group))
      .map((row) => {
        const window = this.minutes.get(row.group);
        const held = this.reserved.get(row.group) ?? NONE;
        return { ...row, tokens: row.input_tokens + row.output_tokens, reserved_tokens: held.tokens, reserved_micros: held.micros, ...this.limits(row.group), requests_this_minute: window?.minute === minute ? window.count : 0 };
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

/** Names a budget for once-only notices: tokens_per_day, usd_per_month, … */
function kindOf(w: BudgetWindow): string {
  return `${w.unit === 'micros' ? 'usd' : 'tokens'}_per_${w.per}`;
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
