// Which calendars a group may use: its configured references (display names or URLs)
// matched against the server's event calendars. Every tool goes through here, so a
// calendar another group's configuration names is never reached from this group, whatever
// the agent passes; an unknown and a forbidden calendar are refused alike.
import { ToolError, truncate } from '#sdk';
import { type DavCollection } from '#sdk/calendar';
import { refKey, type GroupSettings } from './settings.js';

export const NOT_ALLOWED = 'CALENDAR_NOT_ALLOWED';

export function matches(collection: DavCollection, key: string): boolean {
  if (/^https?:\/\//i.test(key)) return collection.url === key;
  if (key.startsWith('/')) return new URL(collection.url).pathname === key;
  return collection.name.normalize('NFC').toLowerCase() === key;
}

/** The server's calendars that `group`'s configured references name, in the configured order. */
export function allowedCalendars(group: GroupSettings | undefined, known: DavCollection[]): DavCollection[] {
  if (!group) return [];
  const out: DavCollection[] = [];
  for (const ref of group.calendars) {
    const key = refKey(ref);
    for (const c of known) if (matches(c, key) && !out.includes(c)) out.push(c);
  }
  return out;
}

const names = (calendars: DavCollection[]): string => (calendars.length === 0 ? '(none)' : calendars.map((c) => JSON.stringify(c.name)).join(', '));

/** Refused: `wanted` is not one of the group's calendars (it may not exist, or belong to another group). */
export function notAllowed(wanted: string | undefined, allowed: DavCollection[]): ToolError {
  if (allowed.length === 0) {
    return new ToolError({ code: NOT_ALLOWED, message: 'No calendar is configured for this group; the owner can add some in the calendar settings.', retriable: false });
  }
  return new ToolError({
    code: NOT_ALLOWED,
    message: `No calendar named ${JSON.stringify(truncate(wanted ?? '', 80))} is available to this group. Its calendars: ${names(allowed)}. Use one of these names.`,
    retriable: false,
  });
}

/** The calendar `wanted` names among `allowed` (a display name, case-insensitively, or its URL). */
export function pickCalendar(wanted: string, allowed: DavCollection[]): DavCollection | undefined {
  const exact = allowed.find((c) => c.name === wanted.trim());
  if (exact) return exact;
  const key = refKey(wanted);
  const found = allowed.filter((c) => matches(c, key));
  return found.length === 1 ? found[0] : undefined;
}

/** One of the group's calendars others can write to (`shared_calendars`). */
export function isShared(group: GroupSettings | undefined, calendar: DavCollection): boolean {
  return group !== undefined && [...group.shared].some((key) => matches(calendar, key));
}
