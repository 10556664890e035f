// iCalendar (RFC 5545) for plugins, on ical.js: parse a calendar object into components,
// read its times as instants, write objects back. ical.js does the syntax (folding,
// escaping, parameters) and recurrences; this module only decides which zone a time is in:
// an IANA name in TZID (the runtime's current rules), else the object's own VTIMEZONE,
// else the zone the plugin uses for the group (floating times, TZIDs nobody knows).
import ICAL from 'ical.js';
import { checkLineStructure } from './ical-text.js';
import { isKnownTimeZone, zonedToUtc } from './time.js';

export { ICAL };
export type IcalComponent = ICAL.Component;
export type IcalTime = ICAL.Time;

/** A time as a calendar holds it: an instant, or a date without a time (all day). */
export type CalendarTime = { kind: 'instant'; ms: number } | { kind: 'date'; date: string };

/** The root component of an iCalendar text, or null when ical.js cannot read it. */
export function parseCalendar(text: string): ICAL.Component | null {
  try {
    const jcal = ICAL.parse(text) as unknown[];
    // One root gives its jCal ([name, props, comps]); several give a list of them: the first counts.
    const root = Array.isArray(jcal[0]) ? (jcal[0] as unknown[]) : jcal;
    if (typeof root[0] !== 'string') return null;
    return new ICAL.Component(root as [string, unknown[], unknown[]]);
  } catch {
    return null;
  }
}

/** Every `name` component (VEVENT, VTODO) of a parsed object; the root too when it is one. */
export function componentsOf(root: ICAL.Component, name: string): ICAL.Component[] {
  const wanted = name.toLowerCase();
  if (root.name === wanted) return [root];
  return root.getAllSubcomponents(wanted);
}

/** The master `name` component: the one without RECURRENCE-ID (an override of one occurrence). */
export function masterComponent(root: ICAL.Component, name: string): ICAL.Component | null {
  const all = componentsOf(root, name);
  return all.find((c) => !c.hasProperty('recurrence-id')) ?? all[0] ?? null;
}

/** The TZID parameter of a component's property, if it has one. */
export function propertyZone(component: ICAL.Component, name: string): string | undefined {
  const tzid = component.getFirstProperty(name.toLowerCase())?.getParameter('tzid');
  return typeof tzid === 'string' && tzid !== '' ? tzid : undefined;
}

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

function knownZone(tzid: string | undefined): string | undefined {
  const name = tzid?.replace(/^\//, '');
  return name && isKnownTimeZone(name) ? name : undefined;
}

/**
 * An ical.js time as an instant (or a date). `tzid` is the TZID the time was written with
 * (ical.js forgets it when no VTIMEZONE defines it, and occurrences of a recurrence are
 * copies); `fallback` is the zone of floating times and of TZIDs neither Intl nor the
 * object defines; UTC without one.
 */
export function toCalendarTime(time: ICAL.Time, zone: { tzid?: string; fallback?: string } = {}): CalendarTime {
  if (time.isDate) return { kind: 'date', date: `${pad(time.year, 4)}-${pad(time.month)}-${pad(time.day)}` };
  const fields: [number, number, number, number, number, number] = [time.year, time.month, time.day, time.hour, time.minute, time.second];
  if (time.zone === ICAL.Timezone.utcTimezone) return { kind: 'instant', ms: Date.UTC(fields[0], fields[1] - 1, fields[2], fields[3], fields[4], fields[5]) };
  const defined = time.zone && time.zone !== ICAL.Timezone.localTimezone && time.zone.tzid !== 'floating' ? time.zone : null;
  const iana = knownZone(zone.tzid) ?? knownZone(defined?.tzid);
  if (iana) return { kind: 'instant', ms: zonedToUtc(fields, iana) };
  if (defined) return { kind: 'instant', ms: time.toUnixTime() * 1000 };
  const fallback = knownZone(zone.fallback);
  if (fallback) return { kind: 'instant', ms: zonedToUtc(fields, fallback) };
  return { kind: 'instant', ms: Date.UTC(fields[0], fields[1] - 1, fields[2], fields[3], fields[4], fields[5]) };
}

/** A date or date-time property (DTSTART, DUE, COMPLETED) as a CalendarTime; null when absent or unreadable. */
export function propertyTime(component: ICAL.Component, name: string, fallback?: string): CalendarTime | null {
  try {
    const value = component.getFirstPropertyValue(name.toLowerCase());
    if (!(value instanceof ICAL.Time)) return null;
    return toCalendarTime(value, { tzid: propertyZone(component, name), fallback });
  } catch {
    return null;
  }
}

/** A text property's value ('' when absent). */
export function propertyText(component: ICAL.Component, name: string): string {
  try {
    const value = component.getFirstPropertyValue(name.toLowerCase());
    return typeof value === 'string' ? value : value === null || value === undefined ? '' : String(value);
  } catch {
    return '';
  }
}

/** A UTC DATE-TIME value for instant `ms` (seconds kept, milliseconds dropped). */
export function utcTime(ms: number): ICAL.Time {
  return ICAL.Time.fromJSDate(new Date(Math.floor(ms / 1000) * 1000), true);
}

/** A DATE value (YYYY-MM-DD). */
export function dateValue(date: string): ICAL.Time {
  return ICAL.Time.fromDateString(date);
}

/** A new VCALENDAR with VERSION, PRODID and CALSCALE; add components to it. */
export function newCalendar(prodid: string): ICAL.Component {
  const root = new ICAL.Component('vcalendar');
  root.updatePropertyWithValue('version', '2.0');
  root.updatePropertyWithValue('prodid', prodid);
  root.updatePropertyWithValue('calscale', 'GREGORIAN');
  return root;
}

/**
 * The text of a component tree: CRLF line ends, folded, ending with a line break. Refused
 * (INVALID_TEXT) when a value would break a line of its own (see ical-text.ts).
 */
export function serializeCalendar(root: ICAL.Component): string {
  return `${checkLineStructure(root.toString())}\r\n`;
}
