// The SDK's calendar part (`#sdk/calendar`), apart from `#sdk` so that a plugin that does
// not speak CalDAV does not load tsdav and ical.js (about 10 MB in each plugin process).
/** iCalendar on ical.js: parse objects, read times in the right zone, write objects (reminders, calendar). */
export { ICAL, componentsOf, dateValue, masterComponent, newCalendar, parseCalendar, propertyText, propertyTime, propertyZone, serializeCalendar, toCalendarTime, utcTime } from './ical.js';
export type { CalendarTime, IcalComponent, IcalTime } from './ical.js';
/** Text an agent wrote, as RFC 5545 TEXT or refused (INVALID_TEXT) naming its field. */
export { checkText, INVALID_TEXT, setText } from './ical-text.js';
/** A repeating event's rule followed to a range, from near it where that keeps the rule, in bounded steps. */
export { walkRule } from './recurrence.js';
export type { RuleWalk, WalkOptions } from './recurrence.js';
/** CalDAV on tsdav: discovery, collections by component type, objects with ETags, classified failures. */
export { CalDavStore, davInitFailure, davRequest, DavAuthRejected, DavConflict, DavHttpError, DavUnreachable, inRequest } from './caldav.js';
export type { DavCollection, DavComponent, DavTimeRange, RequestScope, StoredObject, StoreOptions } from './caldav.js';
/** The CalDAV plugins' connection check (the Checks page): reached, logged in, calendars listed. */
export { checkCalDav, serverMessage } from './caldav-check.js';
export type { CalDavCheckSettings } from './caldav-check.js';
/** Entries written for a session that had read external content: labelled external whenever they are read again. */
export { LabelledUids, MAX_LABELLED } from './labelled-uids.js';
