// A repeating event's rule followed to a range of time, on ical.js, with bounded work.
// ical.js iterates from DTSTART one occurrence at a time: a daily stand-up since 1990 is
// 13,000 steps before today, an hourly one since last year 16,000, and a bound on the steps
// used to hide them from today (listed as nothing, reported as free time).
//
// A rule repeats with a fixed period (INTERVAL times its FREQ unit), and ical.js steps in
// the wall-clock units of DTSTART's zone. So DTSTART moved by a whole number of periods, as
// ical.js itself would step, is a point of the same grid, and the rule yields the same times
// from there on: the walk starts at the last such point before the range instead. Not when
// that would change the rule: COUNT (counted from DTSTART), several RRULEs, a MONTHLY rule
// on the 29th-31st or a YEARLY one on 29 February (moved, the day would change). Those are
// followed from DTSTART. Either way at most `maxSteps` steps; past them the walk says so, and
// its caller must not take the rest of the range as free.
import ICAL from 'ical.js';

export interface RuleWalk {
  /** The rule's times (RRULE and RDATE, EXDATEs left out) from where the walk began to the range's end. */
  times: ICAL.Time[];
  /** The steps ran out (or ical.js could not follow the rule) before the range's end. */
  truncated: boolean;
  /** Steps taken: the work done. */
  steps: number;
}

export interface WalkOptions {
  maxSteps: number;
  /** The instant of a time as the caller reads it (its zone for floating times and dates). */
  instant: (time: ICAL.Time) => number;
}

type Unit = 'seconds' | 'months';

interface Period {
  unit: Unit;
  /** In `unit`s. */
  size: number;
  /** The elapsed time of one unit on average (for the first guess). */
  averageMs: number;
  /** The elapsed time of one period at the shortest (a DST change, February). */
  shortestMs: number;
}

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const PERIODS: Record<string, Period> = {
  SECONDLY: { unit: 'seconds', size: 1, averageMs: 1000, shortestMs: 1000 },
  MINUTELY: { unit: 'seconds', size: 60, averageMs: 1000, shortestMs: 60_000 },
  HOURLY: { unit: 'seconds', size: 3600, averageMs: 1000, shortestMs: HOUR_MS },
  DAILY: { unit: 'seconds', size: 86_400, averageMs: 1000, shortestMs: DAY_MS - HOUR_MS },
  WEEKLY: { unit: 'seconds', size: 604_800, averageMs: 1000, shortestMs: 7 * DAY_MS - HOUR_MS },
  MONTHLY: { unit: 'months', size: 1, averageMs: 30.436875 * DAY_MS, shortestMs: 28 * DAY_MS - HOUR_MS },
  YEARLY: { unit: 'months', size: 12, averageMs: 30.436875 * DAY_MS, shortestMs: 365 * DAY_MS - HOUR_MS },
};

/** Slack before the range: an occurrence's length may differ from DTSTART's by a DST hour, a date's day by one. */
const SLACK_MS = 2 * HOUR_MS;
const DATE_SLACK_MS = DAY_MS;
/** Corrections of the first guess (offsets and DST make elapsed time and wall-clock steps differ by hours). */
const MAX_CORRECTIONS = 4;

/** `time` moved by `count` periods in ical.js's wall-clock units. */
function shifted(time: ICAL.Time, unit: Unit, count: number): ICAL.Time {
  const moved = time.clone();
  if (unit === 'months') {
    const months = moved.year * 12 + (moved.month - 1) + count;
    moved.year = Math.floor(months / 12);
    moved.month = (months % 12) + 1;
    return moved;
  }
  // Whole days and the seconds left, so that adjust's day loop and seconds stay small.
  moved.adjust(Math.floor(count / 86_400), 0, 0, count % 86_400);
  return moved;
}

/** The period of `event`'s rule when moving DTSTART by it keeps the rule's times, else null. */
function movablePeriod(event: ICAL.Event): Period | null {
  const rules = event.component.getAllProperties('rrule');
  if (rules.length !== 1) return null;
  const rule = rules[0].getFirstValue() as ICAL.Recur;
  const period = PERIODS[rule.freq];
  if (!period || rule.count) return null;
  const start = event.startDate;
  if (rule.freq === 'MONTHLY' && start.day > 28) return null;
  if (rule.freq === 'YEARLY' && start.month === 2 && start.day === 29) return null;
  const interval = rule.interval || 1;
  return { ...period, size: period.size * interval, shortestMs: period.shortestMs * interval };
}

/** Where to begin following `event`'s rule so that no occurrence starting before `beforeMs` is needed. */
export function walkStart(event: ICAL.Event, beforeMs: number, instant: (time: ICAL.Time) => number): ICAL.Time {
  const start = event.startDate;
  const period = movablePeriod(event);
  if (!period) return start;
  let count = Math.floor((beforeMs - instant(start)) / (period.size * period.averageMs));
  for (let i = 0; i < MAX_CORRECTIONS && count > 0; i++) {
    const candidate = shifted(start, period.unit, count * period.size);
    const over = instant(candidate) - beforeMs;
    if (over <= 0) return candidate;
    count -= Math.ceil(over / period.shortestMs);
  }
  return start;
}

/**
 * The times of `event`'s rule that may overlap [fromMs, toMs) (and a few before), in order,
 * in at most `maxSteps` steps.
 */
export function walkRule(event: ICAL.Event, range: { fromMs: number; toMs: number }, options: WalkOptions): RuleWalk {
  const walk: RuleWalk = { times: [], truncated: false, steps: 0 };
  try {
    const lengthMs = Math.max(0, options.instant(event.endDate) - options.instant(event.startDate));
    const slack = event.startDate.isDate ? DATE_SLACK_MS : SLACK_MS;
    const iterator = event.iterator(walkStart(event, range.fromMs - lengthMs - slack, options.instant));
    for (;;) {
      if (walk.steps >= options.maxSteps) {
        walk.truncated = true;
        break;
      }
      walk.steps++;
      const next = iterator.next();
      if (!next || options.instant(next) >= range.toMs) break;
      walk.times.push(next.clone());
    }
  } catch {
    // A rule ical.js cannot follow: what was read so far stands, the rest is unknown.
    walk.truncated = true;
  }
  return walk;
}
