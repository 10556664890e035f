// Free time: the gaps of at least a given length, inside working hours on each local day
// (in the group's zone, so a DST change moves nothing), that no busy interval touches.
// Pure arithmetic on instants, no I/O.
import { wallClock, zonedToUtc } from '#sdk';

export interface Interval {
  startMs: number;
  endMs: number;
}

export interface WorkingHours {
  /** "HH:MM" local times; end after start. */
  start: string;
  end: string;
}

export interface FreeTimeQuery {
  fromMs: number;
  toMs: number;
  durationMs: number;
  hours: WorkingHours;
  zone?: string;
  includeWeekends: boolean;
  limit: number;
}

/** A range never spans more days than this (the manifest allows 62). */
const MAX_DAYS = 400;

const minutesOf = (hhmm: string): [number, number] => hhmm.split(':').map(Number) as [number, number];

/** Busy intervals sorted and merged where they overlap or touch. */
export function mergeBusy(busy: Interval[]): Interval[] {
  const sorted = busy.filter((b) => b.endMs > b.startMs).sort((a, b) => a.startMs - b.startMs);
  const merged: Interval[] = [];
  for (const b of sorted) {
    const last = merged[merged.length - 1];
    if (last && b.startMs <= last.endMs) last.endMs = Math.max(last.endMs, b.endMs);
    else merged.push({ ...b });
  }
  return merged;
}

/** The free slots, earliest first, at most `limit`; `more` when others were left out. */
export function findFreeTime(busy: Interval[], q: FreeTimeQuery): { slots: Interval[]; more: boolean } {
  const merged = mergeBusy(busy);
  const slots: Interval[] = [];
  const [sh, sm] = minutesOf(q.hours.start);
  const [eh, em] = minutesOf(q.hours.end);
  const [y, m, d] = wallClock(q.fromMs, q.zone);
  for (let i = 0; i < MAX_DAYS; i++) {
    // Date.UTC normalises day overflow: the i-th local calendar day after the first.
    const day = new Date(Date.UTC(y, m - 1, d + i));
    const fields = [day.getUTCFullYear(), day.getUTCMonth() + 1, day.getUTCDate()] as const;
    const at = (h: number, min: number): number => (q.zone ? zonedToUtc([...fields, h, min, 0], q.zone) : Date.UTC(fields[0], fields[1] - 1, fields[2], h, min));
    const dayStart = at(sh, sm);
    if (dayStart >= q.toMs) break;
    const weekday = day.getUTCDay();
    if (!q.includeWeekends && (weekday === 0 || weekday === 6)) continue;
    let cursor = Math.max(dayStart, q.fromMs);
    const windowEnd = Math.min(at(eh, em), q.toMs);
    for (const b of merged) {
      if (b.endMs <= cursor) continue;
      if (b.startMs >= windowEnd) break;
      if (b.startMs - cursor >= q.durationMs) slots.push({ startMs: cursor, endMs: b.startMs });
      cursor = Math.max(cursor, b.endMs);
      if (cursor >= windowEnd) break;
    }
    if (windowEnd - cursor >= q.durationMs) slots.push({ startMs: cursor, endMs: windowEnd });
    if (slots.length > q.limit) return { slots: slots.slice(0, q.limit), more: true };
  }
  return { slots, more: false };
}
