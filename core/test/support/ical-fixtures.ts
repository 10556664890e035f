// Calendar objects as other clients write them, for the calendar tests: a VEVENT with the
// lines given, and Europe/Berlin's VTIMEZONE as phones send it.

export const BERLIN_VTIMEZONE = [
  'BEGIN:VTIMEZONE',
  'TZID:Europe/Berlin',
  'BEGIN:DAYLIGHT',
  'TZOFFSETFROM:+0100',
  'TZOFFSETTO:+0200',
  'TZNAME:CEST',
  'DTSTART:19700329T020000',
  'RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU',
  'END:DAYLIGHT',
  'BEGIN:STANDARD',
  'TZOFFSETFROM:+0200',
  'TZOFFSETTO:+0100',
  'TZNAME:CET',
  'DTSTART:19701025T030000',
  'RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU',
  'END:STANDARD',
  'END:VTIMEZONE',
];

/** A calendar object as another client writes it. */
export function foreignEvent(lines: string[], vtimezone: string[] = []): string {
  return ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//Another client//EN', ...vtimezone, 'BEGIN:VEVENT', 'DTSTAMP:20300101T000000Z', ...lines, 'END:VEVENT', 'END:VCALENDAR', ''].join('\r\n');
}
