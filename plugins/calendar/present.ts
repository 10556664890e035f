// What the agent and the console panel are shown of an event: its times in the group's
// zone, its text bounded, and, where it is external content (DESIGN 16), the label and
// its text escaped as a stranger's (the approval prompts' own sanitizer).
import { escapeText, formatIso, truncate } from '#sdk';
import type { CalendarTime, DavCollection, LabelledUids } from '#sdk/calendar';
import { isShared } from './access.js';
import type { Occurrence } from './events.js';
import { mailAddress, type GroupSettings } from './settings.js';

const MAX_TEXT_LISTED = 500;

/** Why an event is external content, or null where it is the person's own. */
export function externalReason(event: Occurrence, calendar: DavCollection, group: GroupSettings | undefined, own: Set<string>, labelled: LabelledUids): string | null {
  if (labelled.has(event.uid)) return 'written for a session that had read external content';
  if (isShared(group, calendar)) return `in "${calendar.name}", a calendar others write to`;
  if (event.organizer && !own.has(mailAddress(event.organizer))) return `an invitation from ${escapeText(truncate(event.organizer, 200))}`;
  return null;
}

export function time(value: CalendarTime, zone: string | undefined): string {
  return value.kind === 'date' ? value.date : formatIso(value.ms, zone);
}

/** "start – end" as a person reads it in the group's zone. */
export function when(event: Occurrence, zone: string | undefined): string {
  const allDay = event.start.kind === 'date';
  return `${time(event.start, zone)} – ${time(event.end, zone)}${allDay ? ' (all day)' : ''} (${zone ?? 'UTC'})`;
}

export function present(event: Occurrence, calendar: DavCollection, zone: string | undefined, external: string | null = null): Record<string, unknown> {
  const text = external ? (s: string) => escapeText(s) : (s: string) => s;
  const out: Record<string, unknown> = { event_id: event.uid, calendar: calendar.name, title: text(event.summary), start: time(event.start, zone), end: time(event.end, zone) };
  if (event.start.kind === 'date') out.all_day = true;
  if (event.location) out.location = text(truncate(event.location, MAX_TEXT_LISTED));
  if (event.description) out.description = text(truncate(event.description, MAX_TEXT_LISTED));
  if (event.attendees.length > 0) out.attendees = event.attendees.slice(0, 20).map(text);
  if (event.recurring) out.repeats = true;
  if (event.transparent) out.free = true;
  if (external) {
    out.external = true;
    out.external_why = external;
  }
  return out;
}
