// Repeating events expanded by the calendar plugin (events.ts on the SDK's recurrence.ts):
// followed from near the range instead of from DTSTART, they give exactly what ical.js gives
// from DTSTART, in a few steps; overrides count where their own times put them; a rule that
// must be followed from DTSTART past the step bound is reported incomplete, never as empty.
import { describe, expect, it } from '@jest/globals';
import { ICAL, masterComponent, parseCalendar, propertyZone, toCalendarTime } from '../../sdk/ical.js';
import { instantOf, occurrencesIn } from '../../../plugins/calendar/events.js';
import { BERLIN_VTIMEZONE, foreignEvent } from '../support/ical-fixtures.js';

describe('repeating events, followed from near the range', () => {
  const ZONE = 'Europe/Berlin';
  const object = (lines: string[], vtimezone: string[] = []): string => foreignEvent(['UID:rule@test', 'SUMMARY:rule', ...lines], vtimezone);

  /** ical.js's own expansion from DTSTART, one occurrence at a time and without a bound: the start of each occurrence overlapping [fromMs, toMs). */
  function fromDtstart(text: string, fromMs: number, toMs: number): number[] {
    const master = masterComponent(parseCalendar(text)!, 'VEVENT')!;
    const event = new ICAL.Event(master);
    const zone = { tzid: propertyZone(master, 'dtstart'), fallback: ZONE };
    const at = (t: InstanceType<typeof ICAL.Time>): number => instantOf(toCalendarTime(t, zone), ZONE);
    const starts: number[] = [];
    const iterator = event.iterator();
    for (let next = iterator.next(); next; next = iterator.next()) {
      // Far from the range (by a reading that may be off by the zone's offset): not worth the zone's arithmetic.
      const roughly = next.toUnixTime() * 1000;
      if (roughly < fromMs - 3 * 86_400_000) continue;
      if (roughly > toMs + 3 * 86_400_000 || at(next) >= toMs) break;
      const details = event.getOccurrenceDetails(next);
      const start = at(details.startDate);
      const end = Math.max(start, instantOf(toCalendarTime(details.endDate, { tzid: propertyZone(master, 'dtend') ?? zone.tzid, fallback: ZONE }), ZONE));
      if (end > fromMs || (end === start && start >= fromMs)) starts.push(start);
    }
    return starts;
  }

  // [rule lines, VTIMEZONE, whether the walk may start near the range]
  const RULES: [string[], string[], boolean][] = [
    [['DTSTART:19900101T080000Z', 'DTEND:19900101T081500Z', 'RRULE:FREQ=DAILY'], [], true],
    [['DTSTART:20000101T080000Z', 'DURATION:PT2H', 'RRULE:FREQ=DAILY;INTERVAL=3;BYDAY=MO,WE,FR'], [], true],
    // 02:30 on the day the clocks went forward: that wall-clock time does not exist.
    [['DTSTART;TZID=Europe/Berlin:20180325T023000', 'DURATION:PT1H', 'RRULE:FREQ=DAILY'], BERLIN_VTIMEZONE, true],
    [['DTSTART;TZID=America/New_York:20180311T090000', 'DURATION:PT45M', 'RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;WKST=SU'], [], true],
    // A Wednesday DTSTART for a Monday rule: DTSTART is an occurrence of its own, the rule's grid is Mondays.
    [['DTSTART:19900103T120000Z', 'DURATION:PT1H', 'RRULE:FREQ=WEEKLY;INTERVAL=3;BYDAY=MO'], [], true],
    [['DTSTART:20240101T000500Z', 'DURATION:PT10M', 'RRULE:FREQ=HOURLY;INTERVAL=5'], [], true],
    [['DTSTART;TZID=Europe/Berlin:20240301T090000', 'DURATION:PT20M', 'RRULE:FREQ=HOURLY;BYHOUR=9,10,11;BYDAY=MO,TH'], BERLIN_VTIMEZONE, true],
    [['DTSTART:20261020T000000Z', 'DURATION:PT3M', 'RRULE:FREQ=MINUTELY;INTERVAL=7'], [], true],
    [['DTSTART;VALUE=DATE:20100103', 'DTEND;VALUE=DATE:20100104', 'RRULE:FREQ=DAILY;INTERVAL=2'], [], true],
    [['DTSTART:20160101T070000', 'DURATION:PT1H', 'RRULE:FREQ=DAILY'], [], true], // floating: the group's zone
    [['DTSTART:20050115T100000Z', 'DURATION:PT1H', 'RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR'], [], true],
    [['DTSTART:19900105T100000Z', 'DURATION:PT1H', 'RRULE:FREQ=YEARLY;BYMONTH=3,10;BYDAY=-1SU'], [], true],
    [['DTSTART:20050101T090000Z', 'DURATION:PT1H', 'RRULE:FREQ=DAILY;UNTIL=20261025T000000Z'], [], true],
    [['DTSTART:20050101T080000Z', 'DURATION:PT1H', 'RRULE:FREQ=DAILY', 'EXDATE:20261025T080000Z,20270301T080000Z', 'RDATE:20041231T120000Z,20261025T150000Z,20270302T200000Z'], [], true],
    // Moved, these would change: followed from DTSTART (a few hundred steps since 1990), or COUNT counted from it.
    [['DTSTART:19900131T100000Z', 'DURATION:PT1H', 'RRULE:FREQ=MONTHLY'], [], false],
    [['DTSTART:19920229T100000Z', 'DURATION:PT1H', 'RRULE:FREQ=YEARLY'], [], false],
    [['DTSTART:20050101T090000Z', 'DURATION:PT1H', 'RRULE:FREQ=DAILY;COUNT=7000'], [], false],
  ];
  // Across both DST changes of 2026 (Europe 29 March and 25 October, the US 1 November), and two months.
  const WINDOWS: [string, number][] = [
    ['2026-03-27T22:00:00Z', 3],
    ['2026-10-23T22:00:00Z', 3],
    ['2026-10-31T12:34:56Z', 2],
    ['2027-02-27T23:00:00Z', 40],
  ];

  it('gives exactly the occurrences ical.js gives from DTSTART, in a few steps where the rule allows it', () => {
    for (const [lines, vtimezone, movable] of RULES) {
      const text = object(lines, vtimezone);
      for (const [from, days] of WINDOWS) {
        const fromMs = Date.parse(from);
        const toMs = fromMs + (lines.some((l) => l.includes('MINUTELY')) ? 1 : days) * 86_400_000;
        const expansion = occurrencesIn(text, fromMs, toMs, ZONE);
        const what = `${lines.join(' ')} from ${from}`;
        expect({ what, starts: expansion.occurrences.map((o) => new Date(o.startMs).toISOString()), truncated: expansion.truncated }).toEqual({
          what,
          starts: fromDtstart(text, fromMs, toMs).map((ms) => new Date(ms).toISOString()),
          truncated: false,
        });
        // Near the range: the steps in it and a few before it (two hours' worth, a day for dates, up to two periods).
        if (movable) expect({ what, steps: expansion.steps, few: expansion.steps <= expansion.occurrences.length + 50 }).toMatchObject({ what, few: true });
      }
    }
  }, 90_000);

  it('an override counts wherever its own times put it: moved into the range from years before or after it, or out of it', () => {
    const override = (recurrenceId: string, start: string, summary: string): string =>
      ['BEGIN:VEVENT', 'UID:rule@test', 'DTSTAMP:20300101T000000Z', `RECURRENCE-ID:${recurrenceId}`, `DTSTART:${start}`, 'DURATION:PT1H', `SUMMARY:${summary}`, 'END:VEVENT'].join('\r\n');
    const text = object(['DTSTART:19900101T080000Z', 'DURATION:PT1H', 'RRULE:FREQ=DAILY']).replace(
      'END:VCALENDAR',
      [override('19950101T080000Z', '20260601T150000Z', 'from 1995'), override('20300101T080000Z', '20260602T150000Z', 'from 2030'), override('20260602T080000Z', '20300601T080000Z', 'to 2030'), 'END:VCALENDAR'].join('\r\n'),
    );
    const fromMs = Date.parse('2026-06-01T00:00:00Z');
    const listed = occurrencesIn(text, fromMs, fromMs + 2 * 86_400_000, ZONE).occurrences.map((o) => [o.summary, new Date(o.startMs).toISOString()]);
    expect(listed.sort((a, b) => a[1].localeCompare(b[1]))).toEqual([
      ['rule', '2026-06-01T08:00:00.000Z'],
      ['from 1995', '2026-06-01T15:00:00.000Z'],
      ['from 2030', '2026-06-02T15:00:00.000Z'],
    ]);
  });

  it('an old rule that must be followed from DTSTART and needs more steps than the bound is reported incomplete, never as empty', () => {
    const text = object(['DTSTART:19900101T090000Z', 'DURATION:PT1H', 'RRULE:FREQ=DAILY;COUNT=20000']);
    const fromMs = Date.parse('2026-06-01T00:00:00Z');
    expect(fromDtstart(text, fromMs, fromMs + 86_400_000)).toHaveLength(1);
    expect(occurrencesIn(text, fromMs, fromMs + 86_400_000, ZONE)).toMatchObject({ truncated: true, steps: 10_000 });
  });
});
