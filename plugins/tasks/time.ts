// Time helpers for the scheduler: cron checks on top of node-cron, ISO date-times read
// in a configured IANA timezone, and "the first scheduled time after a given instant".
import cron, { type ScheduledTask } from 'node-cron';
import { isKnownTimeZone, zonedToUtc } from '#sdk';

/** null when valid, else a message naming the faulty field (for the agent or the operator). */
export function cronProblem(expression: string): string | null {
  const result = cron.validateDetailed(expression);
  if (result.valid) return null;
  const first = result.errors[0];
  if (!first) return 'invalid cron expression';
  return first.field === 'expression' ? first.message : `${first.field}: ${first.message}`;
}

export function timezoneProblem(timezone: string): string | null {
  return isKnownTimeZone(timezone) ? null : `unknown timezone "${timezone}" (use an IANA name such as Europe/Berlin)`;
}

/** A stopped node-cron task, only for computing times; destroyed after use. */
function probe<T>(expression: string, timezone: string, fn: (task: ScheduledTask) => T): T {
  const task = cron.createTask(expression, () => undefined, { timezone });
  try {
    return fn(task);
  } finally {
    void task.destroy();
  }
}

/** The shortest gap, in seconds, between the next `count` runs of an expression. */
export function shortestGapSeconds(expression: string, timezone: string, count = 30): number {
  const runs = probe(expression, timezone, (task) => task.getNextRuns(count));
  let gap = Number.POSITIVE_INFINITY;
  for (let i = 1; i < runs.length; i++) gap = Math.min(gap, (runs[i].getTime() - runs[i - 1].getTime()) / 1000);
  return gap;
}

export function nextRunFromNow(expression: string, timezone: string): Date | null {
  return probe(expression, timezone, (task) => task.getNextRuns(1)[0] ?? null);
}

interface Matcher {
  getNextMatch(date: Date): Date;
}

/**
 * The first scheduled time strictly after `date`. node-cron has no public API for this, so
 * its task's matcher is used when present; null when it is not (the caller then falls back
 * to the next run it recorded itself).
 */
export function nextRunAfter(expression: string, timezone: string, date: Date): Date | null {
  return probe(expression, timezone, (task) => {
    const matcher = (task as unknown as { timeMatcher?: Partial<Matcher> }).timeMatcher;
    if (typeof matcher?.getNextMatch !== 'function') return null;
    const next = matcher.getNextMatch.call(matcher, date);
    return next instanceof Date && Number.isFinite(next.getTime()) && next.getTime() > date.getTime() ? next : null;
  });
}

const RUN_AT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * An ISO 8601 date-time as an instant. With Z or an offset it is exact; without one it is
 * a wall-clock time in `timezone`. null when it is not a real date-time.
 */
export function parseRunAt(text: string, timezone: string): Date | null {
  const m = RUN_AT.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number);
  const second = m[6] ? Number(m[6]) : 0;
  const ms = m[7] ? Number(m[7].padEnd(3, '0')) : 0;
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const wall = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const check = new Date(wall);
  if (check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) return null; // 31 February & co.
  const zone = m[8];
  if (zone === 'Z') return new Date(wall);
  if (zone) {
    const sign = zone.startsWith('-') ? -1 : 1;
    const [oh, om] = zone.slice(1).split(':').map(Number);
    if (oh > 23 || om > 59) return null;
    return new Date(wall - sign * (oh * 60 + om) * 60_000);
  }
  // Wall time in the zone (offsets are whole seconds, so the milliseconds just carry over).
  return new Date(zonedToUtc([year, month, day, hour, minute, second], timezone) + ms);
}
