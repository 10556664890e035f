// Events as iCalendar VEVENTs, on the SDK's ical.js helpers: read one (and its occurrences
// in a range, recurrences expanded by ical.js), build a new one, change one in place
// (everything other clients put there stays). Pure functions, no I/O.
import { zonedToUtc } from '#sdk';
import {
  ICAL,
  componentsOf,
  masterComponent,
  newCalendar,
  parseCalendar,
  propertyText,
  propertyZone,
  serializeCalendar,
  setText,
  toCalendarTime,
  utcTime,
  walkRule,
  type CalendarTime,
  type IcalComponent,
  type IcalTime,
} from '#sdk/calendar';

export const PRODID = '-//Carapace//Calendar 1.0//EN';

/** One occurrence of an event (the event itself when it does not repeat). */
export interface Occurrence {
  uid: string;
  summary: string;
  location: string | null;
  description: string | null;
  /** "Name <mail>" or the address, as the event lists them. */
  attendees: string[];
  /** The organizer's address (without mailto:), if the event names one: an invitation's sender. */
  organizer: string | null;
  start: CalendarTime;
  end: CalendarTime;
  /** The instants it covers, for sorting and overlap (a date: its day in the zone). */
  startMs: number;
  endMs: number;
  recurring: boolean;
  /** TRANSP:TRANSPARENT: shown, but not busy. */
  transparent: boolean;
}

export interface Expansion {
  occurrences: Occurrence[];
  /** The step bound (or a rule ical.js cannot follow) stopped the expansion before the range's end. */
  truncated: boolean;
  /** Steps the rule took (the work done for this object). */
  steps: number;
}

/**
 * A rule is followed for at most this many steps. It starts near the range (recurrence.ts),
 * so only an event repeating more often than every ~9 minutes over 62 days, or an old one
 * whose rule cannot start there (COUNT, several RRULEs), reaches it.
 */
const MAX_STEPS = 10_000;

/** The first instant of a date (YYYY-MM-DD) in `zone` (UTC without one). */
function dayStartMs(date: string, zone?: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return zone ? zonedToUtc([y, m, d, 0, 0, 0], zone) : Date.UTC(y, m - 1, d);
}

export function instantOf(time: CalendarTime, zone?: string): number {
  return time.kind === 'instant' ? time.ms : dayStartMs(time.date, zone);
}

function attendeesOf(vevent: IcalComponent): string[] {
  return vevent.getAllProperties('attendee').map((p) => {
    const address = String(p.getFirstValue() ?? '').replace(/^mailto:/i, '');
    const cn = p.getParameter('cn');
    return typeof cn === 'string' && cn.trim() ? `${cn.trim()} <${address}>` : address;
  });
}

function organizerOf(vevent: IcalComponent): string | null {
  const value = vevent.getFirstPropertyValue('organizer');
  return typeof value === 'string' && value.trim() ? value.trim().replace(/^mailto:/i, '') : null;
}

function optionalText(vevent: IcalComponent, name: string): string | null {
  return vevent.hasProperty(name) ? propertyText(vevent, name) : null;
}

/** An occurrence from the component that describes it (the master or an override) and its times. */
function occurrence(item: IcalComponent, start: IcalTime, end: IcalTime, uid: string, recurring: boolean, zone?: string): Occurrence {
  const startTz = propertyZone(item, 'dtstart');
  const s = toCalendarTime(start, { tzid: startTz, fallback: zone });
  const e = toCalendarTime(end, { tzid: propertyZone(item, 'dtend') ?? startTz, fallback: zone });
  const startMs = instantOf(s, zone);
  return {
    uid,
    summary: propertyText(item, 'summary'),
    location: optionalText(item, 'location'),
    description: optionalText(item, 'description'),
    attendees: attendeesOf(item),
    organizer: organizerOf(item),
    start: s,
    end: e,
    startMs,
    endMs: Math.max(startMs, instantOf(e, zone)),
    recurring,
    transparent: propertyText(item, 'transp').toUpperCase() === 'TRANSPARENT',
  };
}

function isCancelled(item: IcalComponent): boolean {
  return propertyText(item, 'status').toUpperCase() === 'CANCELLED';
}

/** The event of a calendar object as it is stored (its first occurrence's times), or null. */
export function readEvent(text: string, zone?: string): Occurrence | null {
  const root = parseCalendar(text);
  const master = root && masterComponent(root, 'VEVENT');
  if (!master) return null;
  const uid = propertyText(master, 'uid').trim();
  if (!uid) return null;
  try {
    const event = new ICAL.Event(master);
    return occurrence(master, event.startDate, event.endDate, uid, event.isRecurring(), zone);
  } catch {
    return null;
  }
}

/**
 * The occurrences of a calendar object's event that overlap [fromMs, toMs): the event
 * itself, or for a repeating one the rule's occurrences (RRULE, RDATE, EXDATE; followed from
 * near the range, recurrence.ts) and each override (RECURRENCE-ID) wherever its own times
 * put it, in place of the occurrence it replaces. Cancelled ones are left out. Times
 * without a zone are in `zone`.
 */
export function occurrencesIn(text: string, fromMs: number, toMs: number, zone?: string): Expansion {
  const root = parseCalendar(text);
  const all = root ? componentsOf(root, 'VEVENT') : [];
  const master = all.find((c) => !c.hasProperty('recurrence-id'));
  const out: Expansion = { occurrences: [], truncated: false, steps: 0 };
  if (!master) return out;
  const uid = propertyText(master, 'uid').trim();
  if (!uid) return out;
  const overlaps = (o: Occurrence): boolean => o.startMs < toMs && (o.endMs > fromMs || (o.endMs === o.startMs && o.startMs >= fromMs));
  const keep = (item: IcalComponent, o: Occurrence): void => {
    if (!isCancelled(item) && overlaps(o)) out.occurrences.push(o);
  };
  try {
    const overrides = all.filter((c) => c !== master && propertyText(c, 'uid').trim() === uid);
    const event = new ICAL.Event(master, { exceptions: overrides });
    if (!event.isRecurring()) {
      keep(master, occurrence(master, event.startDate, event.endDate, uid, false, zone));
      return out;
    }
    const startZone = { tzid: propertyZone(master, 'dtstart'), fallback: zone };
    const instant = (time: IcalTime): number => instantOf(toCalendarTime(time, startZone), zone);
    // An override may move its occurrence from any time (years back, after the range) into it.
    const replaced = new Set<number>();
    for (const override of overrides) {
      const moved = new ICAL.Event(override);
      replaced.add(instantOf(toCalendarTime(moved.recurrenceId, { tzid: propertyZone(override, 'recurrence-id'), fallback: zone }), zone));
      keep(override, occurrence(override, moved.startDate, moved.endDate, uid, true, zone));
    }
    const walk = walkRule(event, { fromMs, toMs }, { maxSteps: MAX_STEPS, instant });
    out.truncated = walk.truncated;
    out.steps = walk.steps;
    for (const time of walk.times) {
      if (replaced.has(instant(time))) continue;
      // The master's times, or a RANGE=THISANDFUTURE override's, moved as ical.js says.
      const details = event.getOccurrenceDetails(time);
      keep(details.item.component, occurrence(details.item.component, details.startDate, details.endDate, uid, true, zone));
    }
  } catch {
    // An object ical.js cannot follow: what was read so far stands.
    out.truncated = true;
  }
  return out;
}

export interface NewEvent {
  uid: string;
  title: string;
  start: Date;
  end: Date;
  location?: string;
  description?: string;
  now: Date;
}

/** A complete VCALENDAR object holding one VEVENT, times in UTC. */
export function buildEvent(e: NewEvent): string {
  const root = newCalendar(PRODID);
  const vevent = new ICAL.Component('vevent');
  const stamp = utcTime(e.now.getTime());
  vevent.updatePropertyWithValue('uid', e.uid);
  vevent.updatePropertyWithValue('dtstamp', stamp);
  vevent.updatePropertyWithValue('created', stamp);
  vevent.updatePropertyWithValue('last-modified', stamp);
  // The agent's words: TEXT as RFC 5545 writes it, or refused naming the field (INVALID_TEXT).
  setText(vevent, 'summary', e.title, 'title');
  vevent.updatePropertyWithValue('dtstart', utcTime(e.start.getTime()));
  vevent.updatePropertyWithValue('dtend', utcTime(e.end.getTime()));
  if (e.location) setText(vevent, 'location', e.location, 'location');
  if (e.description) setText(vevent, 'description', e.description, 'description');
  root.addSubcomponent(vevent);
  return serializeCalendar(root);
}

export interface EventChanges {
  title?: string;
  start?: Date;
  end?: Date;
  location?: string;
  description?: string;
}

/** A value replaced whole: its old parameters (a TZID beside a UTC time) must not stay. */
function replace(vevent: IcalComponent, name: string, value: string | IcalTime): void {
  vevent.removeAllProperties(name);
  vevent.addPropertyWithValue(name, value);
}

/**
 * The object with its master VEVENT changed (SEQUENCE raised, DTSTAMP and LAST-MODIFIED
 * now); every other property, alarm and override as it was. Null when unreadable.
 */
export function editEvent(text: string, changes: EventChanges, now: Date): string | null {
  const root = parseCalendar(text);
  const vevent = root && masterComponent(root, 'VEVENT');
  if (!root || !vevent) return null;
  if (changes.title !== undefined) setText(vevent, 'summary', changes.title, 'title');
  if (changes.location !== undefined) {
    if (changes.location === '') vevent.removeAllProperties('location');
    else setText(vevent, 'location', changes.location, 'location');
  }
  if (changes.description !== undefined) {
    if (changes.description === '') vevent.removeAllProperties('description');
    else setText(vevent, 'description', changes.description, 'description');
  }
  if (changes.start) replace(vevent, 'dtstart', utcTime(changes.start.getTime()));
  if (changes.end) {
    vevent.removeAllProperties('duration');
    replace(vevent, 'dtend', utcTime(changes.end.getTime()));
  }
  const stamp = utcTime(now.getTime());
  replace(vevent, 'dtstamp', stamp);
  replace(vevent, 'last-modified', stamp);
  const sequence = Number.parseInt(propertyText(vevent, 'sequence'), 10);
  replace(vevent, 'sequence', String(Number.isFinite(sequence) && sequence >= 0 ? sequence + 1 : 1));
  return serializeCalendar(root);
}
