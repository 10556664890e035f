// Repeating events another client wrote long ago (a daily stand-up since 1990, an hourly one
// since last year, overrides, zones), put straight on a real CalDAV server (Debian's
// Radicale): the calendar plugin lists today's occurrences and never offers their time as
// free, through the real core, plugin host and ipc binary. Where a calendar cannot be read in
// full, find_free_time says so instead of offering time.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { formatIso, wallClock, zonedToUtc } from '../../sdk/time.js';
import { ROOT, Stack, type IpcResult } from '../harness.js';
import { expectError, expectOk } from '../support/expect-ipc.js';
import { BERLIN_VTIMEZONE, foreignEvent } from '../support/ical-fixtures.js';
import { Radicale } from '../support/radicale.js';
import type { Session } from '../../src/boundary/session-table.js';

const USER = 'carapace';
const PASSWORD = 'Rec-urr1ng-s3cret-4Tb';

describe('repeating events that began long ago still happen today (written by another client, straight to the server)', () => {
  let radicale: Radicale;
  let stack: Stack;
  let main: Session;

  const invoke = (tool: string, args: unknown): Promise<IpcResult> => stack.ipc(main, `tool.invoke.${tool}`, args);
  const put = async (slug: string, name: string, ics: string): Promise<void> => {
    const r = await radicale.request('PUT', `/${USER}/${slug}/${name}.ics`, ics, { 'content-type': 'text/calendar; charset=utf-8' });
    expect(r.status).toBe(201);
  };

  const ZONE = 'Europe/Berlin';
  const HOUR = 3_600_000;
  const [y, m, d] = wallClock(Date.now(), ZONE);
  /** Midnight in Berlin `days` after today's. */
  const midnight = (days: number): number => zonedToUtc([y, m, d + days, 0, 0, 0], ZONE);
  /** The UTC date `days` after today's Berlin date, as iCalendar writes it (20261127). */
  const icalDay = (days: number): string => new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10).replace(/-/g, '');
  const utcAt = (days: number, h: number, min: number): number => Date.UTC(y, m - 1, d + days, h, min);
  const iso = (ms: number): string => formatIso(ms, ZONE);
  const today = { from: iso(midnight(0)), to: iso(midnight(2)) };
  const lastYear = y - 1;
  /** Days since 3 January 1990 (the every-other-day event's first day) of the day `days` after today. */
  const since1990 = (days: number): number => Math.round((Date.UTC(y, m - 1, d + days) - Date.UTC(1990, 0, 3)) / 86_400_000);
  const busy: { title: string; startMs: number; endMs: number }[] = [];

  beforeAll(async () => {
    radicale = await Radicale.start([{ username: USER, password: PASSWORD }]);
    await radicale.makeCalendar('old', 'Old', ['VEVENT']);
    await radicale.makeCalendar('dense', 'Dense', ['VEVENT']);
    stack = await Stack.start({
      plugins: [],
      extraPluginDirs: { calendar: join(ROOT, 'plugins/calendar') },
      env: { CALENDAR_PASSWORD: PASSWORD },
      config: {
        groups: { main: {} },
        plugins: { calendar: { server_url: radicale.url, username: USER, password: '${CALENDAR_PASSWORD}', timezone: 'Europe/Berlin', groups: { main: { calendars: ['Old', 'Dense'] } } } },
      },
    });
    main = await stack.openSession('main');
    await put('old', 'standup', foreignEvent(['UID:standup-1990@phone', 'SUMMARY:Stand-up', 'DTSTART:19900101T080000Z', 'DTEND:19900101T081500Z', 'RRULE:FREQ=DAILY']));
    await put('old', 'ping', foreignEvent(['UID:ping@server', 'SUMMARY:Ping', `DTSTART:${lastYear}0101T000500Z`, 'DURATION:PT10M', 'RRULE:FREQ=HOURLY']));
    // Today's lunch moved to 13:30 (an override by RECURRENCE-ID), tomorrow's cancelled (EXDATE).
    const lunch = foreignEvent(['UID:lunch-1995@phone', 'SUMMARY:Lunch', 'DTSTART:19950101T110000Z', 'DTEND:19950101T120000Z', 'RRULE:FREQ=DAILY', `EXDATE:${icalDay(1)}T110000Z`]).replace(
      'END:VCALENDAR',
      ['BEGIN:VEVENT', 'UID:lunch-1995@phone', 'DTSTAMP:20300101T000000Z', `RECURRENCE-ID:${icalDay(0)}T110000Z`, 'SUMMARY:Lunch (moved)', `DTSTART:${icalDay(0)}T133000Z`, `DTEND:${icalDay(0)}T143000Z`, 'END:VEVENT', 'END:VCALENDAR'].join('\r\n'),
    );
    await put('old', 'lunch', lunch);
    // A zone by its IANA name only (no VTIMEZONE), and one by its own VTIMEZONE, every other day.
    await put('old', 'ny', foreignEvent(['UID:ny-sync@laptop', 'SUMMARY:NY sync', 'DTSTART;TZID=America/New_York:19900102T070000', 'DURATION:PT30M', 'RRULE:FREQ=DAILY']));
    await put('old', 'evening', foreignEvent(['UID:evening@phone', 'SUMMARY:Evening class', 'DTSTART;TZID=Europe/Berlin:19900103T170000', 'DTEND;TZID=Europe/Berlin:19900103T180000', 'RRULE:FREQ=DAILY;INTERVAL=2'], BERLIN_VTIMEZONE));
    // Every minute for a week (Radicale itself follows a rule from DTSTART for a time-range query: since 1990 it would take minutes).
    await put('dense', 'metronome', foreignEvent(['UID:metronome@server', 'SUMMARY:Metronome', `DTSTART:${icalDay(-7)}T000000Z`, 'DURATION:PT1M', 'RRULE:FREQ=MINUTELY']));
    for (const day of [0, 1]) {
      busy.push({ title: 'Stand-up', startMs: utcAt(day, 8, 0), endMs: utcAt(day, 8, 15) });
      const ny = zonedToUtc([y, m, d + day, 7, 0, 0], 'America/New_York');
      busy.push({ title: 'NY sync', startMs: ny, endMs: ny + HOUR / 2 });
      if (since1990(day) % 2 === 0) busy.push({ title: 'Evening class', startMs: zonedToUtc([y, m, d + day, 17, 0, 0], ZONE), endMs: zonedToUtc([y, m, d + day, 18, 0, 0], ZONE) });
    }
    busy.push({ title: 'Lunch (moved)', startMs: utcAt(0, 13, 30), endMs: utcAt(0, 14, 30) });
    for (let t = Math.ceil((midnight(0) - 5 * 60_000) / HOUR) * HOUR + 5 * 60_000; t < midnight(2); t += HOUR) busy.push({ title: 'Ping', startMs: t, endMs: t + 10 * 60_000 });
  });

  it('list_events for today and tomorrow holds every occurrence: daily since 1990, hourly since last year, an override and an EXDATE, zones by name and by VTIMEZONE', async () => {
    const out = expectOk(await invoke('list_events', { ...today, calendar: 'Old', limit: 200 }));
    expect(out.warning).toBeUndefined();
    const expected = [...busy].sort((a, b) => a.startMs - b.startMs || a.title.localeCompare(b.title)).map((b) => [b.title, iso(b.startMs), iso(b.endMs)]);
    expect(out.events.map((e: { title: string; start: string; end: string }) => [e.title, e.start, e.end])).toEqual(expected);
    expect(out.count).toBe(expected.length);
    expect(out.events.filter((e: { title: string }) => e.title === 'Ping').length).toBeGreaterThanOrEqual(46);
    expect(out.events.every((e: { repeats?: boolean }) => e.repeats === true)).toBe(true);
  });

  it('find_free_time never offers a minute they take', async () => {
    const out = expectOk(await invoke('find_free_time', { ...today, duration_minutes: 5, working_hours: { start: '00:00', end: '23:59' }, include_weekends: true, calendars: ['Old'], limit: 50 }));
    expect(out.warning).toBeUndefined();
    expect(out.slots.length).toBe(50);
    const reached = Date.parse(out.slots.at(-1).end);
    for (const slot of out.slots as { start: string; end: string }[]) {
      for (const b of busy) if (Date.parse(slot.start) < b.endMs && Date.parse(slot.end) > b.startMs) throw new Error(`free ${slot.start} – ${slot.end} overlaps ${b.title} ${iso(b.startMs)}`);
    }
    // Between the hourly pings at most 50 minutes are free; the rest of the day's events cut those.
    expect(out.slots.every((s: { minutes: number }) => s.minutes <= 50)).toBe(true);
    expect(busy.filter((b) => b.title !== 'Ping' && b.startMs < reached).length).toBeGreaterThanOrEqual(3);
  });

  it('every minute since a week ago: a day is read whole (all of it busy); weeks of it are too many, and then no time is called free', async () => {
    const day = { from: iso(midnight(0)), to: iso(midnight(1)) };
    const listed = expectOk(await invoke('list_events', { ...day, calendar: 'Dense', limit: 1 }));
    expect(listed).toMatchObject({ count: (midnight(1) - midnight(0)) / 60_000, events: [{ title: 'Metronome', start: iso(midnight(0)) }] });
    expect(listed.warning).toBeUndefined();
    const free = expectOk(await invoke('find_free_time', { ...day, duration_minutes: 5, working_hours: { start: '00:00', end: '23:59' }, include_weekends: true, calendars: ['Dense'] }));
    expect(free.slots).toEqual([]);
    const weeks = { from: iso(midnight(0)), to: iso(midnight(21)) };
    const incomplete = expectError(await invoke('find_free_time', { ...weeks, duration_minutes: 5, include_weekends: true, calendars: ['Dense'] }), 'CALENDAR_INCOMPLETE', { retriable: false });
    expect(incomplete.message).toMatch(/could not be read in full/);
    expect(expectOk(await invoke('list_events', { ...weeks, calendar: 'Dense', limit: 1 })).warning).toMatch(/not every occurrence could be read/);
  });

  afterAll(async () => {
    await stack?.stop().catch(() => undefined);
    await radicale?.stop();
  });
});
