// Calendar events over CalDAV (iCloud, Nextcloud, Fastmail, Radicale): list (recurrences
// expanded), create, update, delete, and find free time. Each group reaches only the
// calendars its configuration names (access.ts); an event's id is its VEVENT UID, which
// the plugin resolves to the object's URL itself, inside those calendars only.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import {
  formatIso,
  ToolError,
  truncate,
  type CoreServices,
  type JsonObject,
  type PluginConfig,
  type PluginHandler,
  type RequestContext,
  type RequestEnvelope,
  type CheckConnections,
} from '#sdk';
import { CalDavStore, checkCalDav, DavConflict, davInitFailure, davRequest, LabelledUids, type DavCollection, type StoredObject } from '#sdk/calendar';
import { allowedCalendars, notAllowed, pickCalendar } from './access.js';
import { toolError } from './errors.js';
import { buildEvent, editEvent, occurrencesIn, readEvent, type EventChanges, type Occurrence } from './events.js';
import { findFreeTime, type Interval } from './free-time.js';
import { serveCalendarPanel, type PanelSource } from './panel.js';
import { externalReason, present, when } from './present.js';
import { parseSettings, type GroupSettings, type Settings } from './settings.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'calendar' } }, pino.destination(2));

/** The Checks page's connection test: the CalDAV server reached, the login taken, the calendars listed. */
export const checkConnections: CheckConnections = (config, context) => checkCalDav(config, context, 'VEVENT');

const DAY_MS = 86_400_000;
/** list_events and find_free_time look at most this far (the manifest says so too). */
const MAX_RANGE_DAYS = 62;
const MAX_UID = 255;
/** Occurrences gathered for one call at most (a calendar full of minutely rules stays bounded). */
const MAX_COLLECTED = 5000;

interface Located {
  calendar: DavCollection;
  object: StoredObject;
  event: Occurrence;
}

/** The group a call is for, with its settings and calendars. */
interface Scope {
  group: string;
  settings: GroupSettings | undefined;
  zone: string | undefined;
  calendars: DavCollection[];
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const shown = (value: string): string => JSON.stringify(truncate(value, 80));

function invalid(message: string): ToolError {
  return new ToolError({ code: 'INVALID_ARGUMENTS', message, retriable: false });
}

/** An ISO 8601 date-time argument (the manifest checked its form) as an instant. */
function instant(value: unknown, field: string): Date {
  const ms = Date.parse(String(value ?? ''));
  if (!Number.isFinite(ms)) throw invalid(`${field} is not a valid date-time: use ISO 8601 with an offset, e.g. 2026-03-01T17:00:00+01:00`);
  return new Date(ms);
}

function range(args: JsonObject): { from: Date; to: Date } {
  const from = instant(args.from, 'from');
  const to = instant(args.to, 'to');
  if (to.getTime() <= from.getTime()) throw invalid('to must be after from');
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * DAY_MS) throw invalid(`the range may span at most ${MAX_RANGE_DAYS} days: ask in parts`);
  return { from, to };
}

/** Changed elsewhere between read and write: read again and try once more. */
async function retryOnceOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    if (err instanceof DavConflict) return attempt();
    throw err;
  }
}

export default class CalendarPlugin implements PluginHandler, PanelSource {
  private settings!: Settings;
  private store!: CalDavStore;
  private known: DavCollection[] = [];
  /** group + UID → where it was last seen; verified (and checked against the group) on every use. */
  private readonly seen = new Map<string, string>();
  /** Events written for a session that had read external content: external whenever read. */
  private labelled!: LabelledUids;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.settings = parseSettings(config);
    this.labelled = new LabelledUids(services.dataDir, (err) => log.error({ err: err.message }, 'could not save which events are labelled external'));
    const loaded = this.labelled.load();
    if (loaded.movedAside) log.warn({ moved_to: loaded.movedAside }, 'the file of labelled events was unreadable: moved aside; events it named are no longer labelled');
    this.store = new CalDavStore({ serverUrl: this.settings.serverUrl, username: this.settings.username, password: this.settings.password, timeoutMs: this.settings.requestTimeoutMs });
    try {
      await this.store.connect();
      this.known = await this.store.collections('VEVENT');
    } catch (err) {
      throw davInitFailure(err);
    }
    for (const [group, g] of this.settings.groups) {
      const found = allowedCalendars(g, this.known).length;
      if (found < g.calendars.length) log.warn({ group, configured: g.calendars.length, found }, 'some calendars configured for this group are not on the server');
    }
    log.info({ calendars: this.known.length, groups: this.settings.groups.size }, 'connected to the CalDAV server');
  }

  async handleRequest(envelope: RequestEnvelope, context?: RequestContext): Promise<unknown> {
    return davRequest(context?.signal, () => this.dispatch(envelope), toolError);
  }

  private async dispatch(envelope: RequestEnvelope): Promise<unknown> {
    const args = envelope.payload.arguments;
    const tool = envelope.topic.slice('tool.invoke.'.length);
    const scope = await this.scope(envelope.group);
    // What a session that read external content writes may carry a stranger's words.
    const labelled = envelope.external_content === true;
    switch (tool) {
      case 'list_events':
        return this.listEvents(scope, args);
      case 'create_event':
        return this.createEvent(scope, args, labelled);
      case 'update_event':
        return this.updateEvent(scope, args, labelled);
      case 'delete_event':
        return this.deleteEvent(scope, String(args.event_id));
      case 'find_free_time':
        return this.freeTime(scope, args);
      default:
        throw new ToolError({ code: 'UNKNOWN_TOOL', message: `unknown tool ${tool}`, retriable: false });
    }
  }

  /** For update_event's and delete_event's prompts: the event the id names, as the server has it now. */
  async describeCall(tool: string, args: JsonObject, group: string): Promise<string[]> {
    if (tool !== 'delete_event' && tool !== 'update_event') return [];
    const scope = await this.scope(group);
    let found: Located;
    try {
      found = await this.locate(scope, String(args.event_id));
    } catch (err) {
      if (err instanceof ToolError) return [`No event has this id in this group's calendars: nothing would be ${tool === 'delete_event' ? 'deleted' : 'changed'}.`];
      throw err;
    }
    const { event, calendar } = found;
    return [
      `The event "${truncate(event.summary, 300)}" in the calendar "${calendar.name}", ${when(event, scope.zone)}${event.recurring ? ' (repeating: every occurrence)' : ''}`,
      event.attendees.length > 0 ? `Attendees: ${truncate(event.attendees.join(', '), 1500)}` : 'No attendees',
      ...(event.location ? [`Location: ${truncate(event.location, 300)}`] : []),
    ];
  }

  servePanel(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return serveCalendarPanel(this, req, res);
  }

  // ---- what the console panel shows --------------------------------------------------------

  panelGroups(): string[] {
    return [...this.settings.groups.keys()];
  }

  async panelOverview(group: string, days: number): Promise<unknown> {
    const scope = await this.scope(group);
    const from = new Date();
    const to = new Date(from.getTime() + days * DAY_MS);
    const listed = await this.collect(scope, scope.calendars, from, to);
    return {
      group,
      timezone: scope.zone ?? 'UTC',
      calendars: scope.calendars.map((c) => c.name),
      events: listed.events.slice(0, 100).map(({ event, calendar }) => present(event, calendar, scope.zone, this.external(scope, event, calendar))),
    };
  }

  // ---- tools ------------------------------------------------------------------------------

  private async listEvents(scope: Scope, args: JsonObject): Promise<unknown> {
    const { from, to } = range(args);
    const limit = typeof args.limit === 'number' ? args.limit : 50;
    const wanted = str(args.calendar);
    const calendars = wanted ? [this.pick(scope, wanted)] : this.all(scope);
    const listed = await this.collect(scope, calendars, from, to);
    const events = listed.events.slice(0, limit).map(({ event, calendar }) => present(event, calendar, scope.zone, this.external(scope, event, calendar)));
    const result: Record<string, unknown> = {
      from: formatIso(from.getTime(), scope.zone),
      to: formatIso(to.getTime(), scope.zone),
      timezone: scope.zone ?? 'UTC',
      count: listed.events.length,
      events,
    };
    // The core labels the reading session (DESIGN 16).
    if (events.some((e) => e.external === true)) result.external_content = true;
    if (listed.events.length > limit) result.truncated = `only the first ${limit} are shown: ask for a shorter range`;
    if (listed.incomplete) result.warning = 'not every occurrence could be read (a repeating event too long to expand, or too many events): ask for a shorter range';
    return result;
  }

  private async createEvent(scope: Scope, args: JsonObject, labelled: boolean): Promise<unknown> {
    const title = String(args.title ?? '').trim();
    if (!title) throw invalid('title is empty');
    const start = instant(args.start, 'start');
    let end: Date;
    if (args.end !== undefined) end = instant(args.end, 'end');
    else if (typeof args.duration_minutes === 'number') end = new Date(start.getTime() + args.duration_minutes * 60_000);
    else throw invalid('give end or duration_minutes');
    if (end.getTime() <= start.getTime()) throw invalid('end must be after start');
    const calendar = this.pickOrDefault(scope, str(args.calendar));
    const uid = randomUUID();
    const url = `${calendar.url}${uid}.ics`;
    const data = buildEvent({ uid, title, start, end, location: str(args.location)?.trim() || undefined, description: str(args.description)?.trim() || undefined, now: new Date() });
    if (labelled) this.labelled.add(uid); // before the write: a label never comes late
    await this.store.put(url, data, null, 'creating the event');
    this.seen.set(`${scope.group}\n${uid}`, url);
    return { event_id: uid, status: 'created', calendar: calendar.name, title, start: formatIso(start.getTime(), scope.zone), end: formatIso(end.getTime(), scope.zone) };
  }

  private async updateEvent(scope: Scope, args: JsonObject, labelled: boolean): Promise<unknown> {
    const changes: EventChanges = {};
    if (args.title !== undefined) {
      changes.title = String(args.title).trim();
      if (!changes.title) throw invalid('title is empty');
    }
    if (args.start !== undefined) changes.start = instant(args.start, 'start');
    if (args.end !== undefined) changes.end = instant(args.end, 'end');
    if (args.location !== undefined) changes.location = String(args.location).trim();
    if (args.description !== undefined) changes.description = String(args.description).trim();
    if (Object.keys(changes).length === 0) throw invalid('nothing to change: give title, start, end, location or description');
    return retryOnceOnConflict(async () => {
      const { calendar, object, event } = await this.locate(scope, String(args.event_id));
      if (event.recurring && (changes.start || changes.end)) {
        throw new ToolError({ code: 'RECURRING_EVENT', message: 'This event repeats; its times can only be changed in the calendar app. Title, location and description can be changed here.', retriable: false });
      }
      const edited = editEvent(object.data, changes, new Date());
      const after = edited && readEvent(edited, scope.zone);
      if (!edited || !after) throw new ToolError({ code: 'EVENT_UNREADABLE', message: 'This event could not be read; ask the user to change it in their calendar app.', retriable: false });
      if (after.endMs < after.startMs || (after.endMs === after.startMs && (changes.start || changes.end))) throw invalid('the event would end before it starts: give both start and end');
      if (labelled) this.labelled.add(event.uid);
      await this.store.put(object.url, edited, object.etag, 'updating the event');
      const reason = this.external(scope, after, calendar);
      return { event_id: event.uid, status: 'updated', ...present(after, calendar, scope.zone, reason), ...(reason ? { external_content: true } : {}) };
    });
  }

  private async deleteEvent(scope: Scope, id: string): Promise<unknown> {
    return retryOnceOnConflict(async () => {
      const { calendar, object, event } = await this.locate(scope, id);
      const reason = this.external(scope, event, calendar);
      await this.store.remove(object.url, object.etag);
      this.seen.delete(`${scope.group}\n${event.uid}`);
      this.labelled.remove(event.uid);
      const { title } = present(event, calendar, scope.zone, reason);
      return { event_id: event.uid, status: 'deleted', calendar: calendar.name, title, ...(reason ? { external_content: true } : {}) };
    });
  }

  private async freeTime(scope: Scope, args: JsonObject): Promise<unknown> {
    const { from, to } = range(args);
    const wanted = Array.isArray(args.calendars) ? args.calendars.filter((c): c is string => typeof c === 'string') : [];
    const calendars = wanted.length > 0 ? wanted.map((w) => this.pick(scope, w)) : this.all(scope);
    const hoursArg = args.working_hours as { start?: string; end?: string } | undefined;
    const hours = { start: hoursArg?.start ?? scope.settings!.hours.start, end: hoursArg?.end ?? scope.settings!.hours.end };
    if (hours.end <= hours.start) throw invalid('working_hours end must be after start');
    const listed = await this.collect(scope, calendars, from, to);
    // Time nobody could read is never free: no slots rather than some that may be taken.
    if (listed.incomplete) {
      throw new ToolError({
        code: 'CALENDAR_INCOMPLETE',
        message: 'The calendars could not be read in full for this range (an event repeats too often to follow, or there are too many events), so no time can be called free. Ask for a shorter range, or check the calendar app.',
        retriable: false,
      });
    }
    const busy: Interval[] = listed.events.filter(({ event }) => !event.transparent).map(({ event }) => ({ startMs: event.startMs, endMs: event.endMs }));
    const { slots, more } = findFreeTime(busy, {
      fromMs: from.getTime(),
      toMs: to.getTime(),
      durationMs: Number(args.duration_minutes) * 60_000,
      hours,
      zone: scope.zone,
      includeWeekends: args.include_weekends === true,
      limit: typeof args.limit === 'number' ? args.limit : 10,
    });
    const result: Record<string, unknown> = {
      timezone: scope.zone ?? 'UTC',
      working_hours: hours,
      calendars: calendars.map((c) => c.name),
      slots: slots.map((s) => ({ start: formatIso(s.startMs, scope.zone), end: formatIso(s.endMs, scope.zone), minutes: Math.floor((s.endMs - s.startMs) / 60_000) })),
    };
    if (more) result.more = 'more free slots exist later in the range';
    return result;
  }

  // ---- calendars and events -------------------------------------------------------------------

  /** The group's settings and calendars; the server is asked again when one configured is missing. */
  private async scope(group: string): Promise<Scope> {
    const settings = this.settings.groups.get(group);
    let calendars = allowedCalendars(settings, this.known);
    if (settings && calendars.length < settings.calendars.length) {
      this.known = await this.store.collections('VEVENT');
      calendars = allowedCalendars(settings, this.known);
    }
    return { group, settings, zone: settings?.timezone, calendars };
  }

  private all(scope: Scope): DavCollection[] {
    if (scope.calendars.length === 0) throw notAllowed(undefined, scope.calendars);
    return scope.calendars;
  }

  private pick(scope: Scope, wanted: string): DavCollection {
    const found = pickCalendar(wanted, scope.calendars);
    if (!found) throw notAllowed(wanted, scope.calendars);
    return found;
  }

  private pickOrDefault(scope: Scope, wanted: string | undefined): DavCollection {
    if (wanted) return this.pick(scope, wanted);
    const preferred = scope.settings?.defaultCalendar;
    return preferred ? this.pick(scope, preferred) : this.all(scope)[0];
  }

  /** Every occurrence in [from, to) in these calendars, earliest first. */
  private async collect(scope: Scope, calendars: DavCollection[], from: Date, to: Date): Promise<{ events: { event: Occurrence; calendar: DavCollection }[]; incomplete: boolean }> {
    const events: { event: Occurrence; calendar: DavCollection }[] = [];
    let incomplete = false;
    // A day's margin: the server reads all-day and floating times in UTC; the exact cut is made here.
    const margin = { start: new Date(from.getTime() - DAY_MS), end: new Date(to.getTime() + DAY_MS) };
    for (const calendar of calendars) {
      for (const object of await this.store.objects(calendar, 'VEVENT', margin)) {
        const expansion = occurrencesIn(object.data, from.getTime(), to.getTime(), scope.zone);
        incomplete ||= expansion.truncated;
        for (const event of expansion.occurrences) {
          if (events.length >= MAX_COLLECTED) {
            incomplete = true;
            break;
          }
          events.push({ event, calendar });
          this.seen.set(`${scope.group}\n${event.uid}`, object.url);
        }
      }
    }
    events.sort((a, b) => a.event.startMs - b.event.startMs || a.event.summary.localeCompare(b.event.summary));
    return { events, incomplete };
  }

  /** The event with this id (its UID), in one of the group's calendars only. */
  private async locate(scope: Scope, id: string): Promise<Located> {
    const uid = id.trim();
    const notFound = (): ToolError =>
      new ToolError({ code: 'EVENT_NOT_FOUND', message: `No event has the id ${shown(id)} in this group's calendars. Use list_events to get the current event_id values.`, retriable: false });
    // eslint-disable-next-line no-control-regex
    if (!uid || uid.length > MAX_UID || /[\u0000-\u001f\u007f]/.test(uid)) throw notFound();
    const key = `${scope.group}\n${uid}`;
    const cached = this.seen.get(key);
    const cachedIn = cached ? scope.calendars.find((c) => cached.startsWith(c.url)) : undefined;
    if (cached && cachedIn) {
      const object = await this.store.get(cached);
      const event = object && readEvent(object.data, scope.zone);
      if (object && event?.uid === uid) return { calendar: cachedIn, object, event };
    }
    this.seen.delete(key);
    for (const calendar of scope.calendars) {
      for (const object of await this.store.findByUid(calendar, 'VEVENT', uid)) {
        const event = readEvent(object.data, scope.zone);
        if (event?.uid === uid) {
          this.seen.set(key, object.url);
          return { calendar, object, event };
        }
      }
    }
    throw notFound();
  }

  private external(scope: Scope, event: Occurrence, calendar: DavCollection): string | null {
    return externalReason(event, calendar, scope.settings, this.settings.ownAddresses, this.labelled);
  }
}
