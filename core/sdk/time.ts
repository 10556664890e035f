// Time-zone arithmetic for plugins, on the runtime's Intl data (IANA names such as
// Europe/Berlin): no time-zone library, no I/O.

/** True when `tz` is a time zone name this runtime knows (IANA, e.g. Europe/Berlin). */
export function isKnownTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** One formatter per zone: building an Intl.DateTimeFormat costs far more than using one. */
const zoneFormats = new Map<string, Intl.DateTimeFormat>();

/**
 * Offset of `tz` from UTC at instant `ms`, in milliseconds (positive east of Greenwich),
 * to the second. Throws a RangeError for a zone the runtime does not know.
 */
export function zoneOffsetMs(ms: number, tz: string): number {
  let format = zoneFormats.get(tz);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      era: 'short',
    });
    zoneFormats.set(tz, format);
  }
  const parts: Record<string, string> = {};
  for (const p of format.formatToParts(new Date(ms))) parts[p.type] = p.value;
  let year = Number(parts.year);
  if (parts.era === 'BC' || parts.era === 'B') year = 1 - year;
  const asUtc = Date.UTC(year, Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second));
  const whole = Math.floor(ms / 1000) * 1000;
  return asUtc - whole;
}

/**
 * The instant (ms since the epoch) of a wall-clock time in `tz`: [year, month (1-12), day,
 * hour, minute, second]. Guessed with the offset at the guess, then corrected once, so a
 * time skipped by a DST change gives the later reading.
 */
export function zonedToUtc(fields: [number, number, number, number, number, number], tz: string): number {
  const [y, mo, d, h, mi, s] = fields;
  const guess = Date.UTC(y, mo - 1, d, h, mi, s);
  const first = guess - zoneOffsetMs(guess, tz);
  return guess - zoneOffsetMs(first, tz);
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/** ISO 8601 with the offset of `tz` at that instant (Z without a zone): 2026-03-01T17:00:00+01:00. */
export function formatIso(ms: number, tz?: string): string {
  if (!tz) return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const offset = zoneOffsetMs(ms, tz);
  const local = new Date(Math.floor(ms / 1000) * 1000 + offset).toISOString().slice(0, 19);
  if (offset === 0) return `${local}Z`;
  const sign = offset > 0 ? '+' : '-';
  const abs = Math.abs(offset) / 60_000;
  return `${local}${sign}${pad2(Math.floor(abs / 60))}:${pad2(abs % 60)}`;
}

/** The wall clock of instant `ms` in `tz` (UTC without one): [year, month (1-12), day, hour, minute, second]. */
export function wallClock(ms: number, tz?: string): [number, number, number, number, number, number] {
  const d = new Date(Math.floor(ms / 1000) * 1000 + (tz ? zoneOffsetMs(ms, tz) : 0));
  return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
}
