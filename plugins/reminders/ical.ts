// The little iCalendar (RFC 5545) the reminders plugin needs: escape and fold what it
// writes, unfold and parse the VTODOs a CalDAV server returns, and edit a VTODO in place
// without losing properties other clients put there. Pure functions, no I/O.
import { isKnownTimeZone, zonedToUtc, zoneOffsetMs } from '#sdk';

const CRLF = '\r\n';
/** A content line may be at most 75 octets long, not counting the line break (3.1). */
const LINE_OCTETS = 75;

export const PRODID = '-//Carapace//Reminders 1.0//EN';

// ---- text values and lines ------------------------------------------------------------------

/** TEXT value escaping (3.3.11): backslash, semicolon, comma and line breaks. */
export function escapeText(value: string): string {
  return value
    .replace(/\\/g, '\\\\')
    .replace(/;/g, '\\;')
    .replace(/,/g, '\\,')
    .replace(/\r\n|\r|\n/g, '\\n');
}

/** The inverse of escapeText; tolerant of what other writers produce (`\N`, stray backslashes). */
export function unescapeText(value: string): string {
  return value.replace(/\\(.)/gs, (_m, c: string) => (c === 'n' || c === 'N' ? '\n' : c));
}

/**
 * Folds one content line into lines of at most 75 octets (UTF-8), each continuation
 * starting with one space; never splits a character (or a surrogate pair).
 */
export function foldLine(line: string): string {
  if (Buffer.byteLength(line, 'utf8') <= LINE_OCTETS) return line;
  const parts: string[] = [];
  let current = '';
  let octets = 0;
  let limit = LINE_OCTETS;
  for (const ch of line) {
    const size = Buffer.byteLength(ch, 'utf8');
    if (octets + size > limit) {
      parts.push(current);
      current = '';
      octets = 0;
      limit = LINE_OCTETS - 1; // the leading space of a continuation line counts
    }
    current += ch;
    octets += size;
  }
  parts.push(current);
  return parts.join(`${CRLF} `);
}

/** Joins folded lines (CRLF or a bare LF followed by a space or a tab) and splits into lines. */
export function unfoldLines(text: string): string[] {
  return text
    .replace(/\r?\n[ \t]/g, '')
    .split(/\r?\n|\r/)
    .filter((line) => line.length > 0);
}

export interface Property {
  name: string;
  params: Record<string, string>;
  value: string;
}

/** Parses one unfolded content line: NAME *(;PARAM=value) : value, with quoted parameter values. */
export function parseProperty(line: string): Property | null {
  let i = 0;
  const nameEnd = line.search(/[;:]/);
  if (nameEnd <= 0) return null;
  const name = line.slice(0, nameEnd).toUpperCase();
  i = nameEnd;
  const params: Record<string, string> = {};
  while (line[i] === ';') {
    i++;
    const eq = line.indexOf('=', i);
    if (eq < 0) return null;
    const key = line.slice(i, eq).toUpperCase();
    i = eq + 1;
    const values: string[] = [];
    for (;;) {
      if (line[i] === '"') {
        const close = line.indexOf('"', i + 1);
        if (close < 0) return null;
        values.push(line.slice(i + 1, close));
        i = close + 1;
      } else {
        let j = i;
        while (j < line.length && line[j] !== ';' && line[j] !== ':' && line[j] !== ',') j++;
        values.push(line.slice(i, j));
        i = j;
      }
      if (line[i] !== ',') break;
      i++;
    }
    params[key] = values.join(',');
  }
  if (line[i] !== ':') return null;
  return { name, params, value: line.slice(i + 1) };
}

// ---- date-times ----------------------------------------------------------------------------

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** A UTC DATE-TIME value: 20260301T160000Z (seconds kept, milliseconds dropped). */
export function formatUtc(date: Date): string {
  return (
    `${pad(date.getUTCFullYear(), 4)}${pad(date.getUTCMonth() + 1)}${pad(date.getUTCDate())}` +
    `T${pad(date.getUTCHours())}${pad(date.getUTCMinutes())}${pad(date.getUTCSeconds())}Z`
  );
}

/** ISO 8601 with the offset of `tz` (or Z without one): 2026-03-01T17:00:00+01:00. */
export function formatIso(ms: number, tz?: string): string {
  if (!tz) return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const offset = zoneOffsetMs(ms, tz);
  const local = new Date(Math.floor(ms / 1000) * 1000 + offset).toISOString().slice(0, 19);
  if (offset === 0) return `${local}Z`;
  const sign = offset > 0 ? '+' : '-';
  const abs = Math.abs(offset) / 60_000;
  return `${local}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

export type DueValue = { kind: 'instant'; ms: number } | { kind: 'date'; date: string };

/**
 * A DUE/COMPLETED value as found on servers: UTC (…Z), with TZID (resolved when the runtime
 * knows the zone, else in `fallbackTz`), floating (in `fallbackTz`, else UTC), or a DATE.
 */
export function parseDateValue(prop: Property, fallbackTz?: string): DueValue | null {
  const value = prop.value.trim();
  const date = /^(\d{4})(\d{2})(\d{2})$/.exec(value);
  if (date || prop.params.VALUE?.toUpperCase() === 'DATE') {
    if (!date) return null;
    return { kind: 'date', date: `${date[1]}-${date[2]}-${date[3]}` };
  }
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)$/i.exec(value);
  if (!m) return null;
  const fields = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (m[7]) return { kind: 'instant', ms: Date.UTC(fields[0], fields[1] - 1, fields[2], fields[3], fields[4], fields[5]) };
  const tzid = prop.params.TZID?.replace(/^\//, '');
  const tz = tzid && isKnownTimeZone(tzid) ? tzid : fallbackTz;
  if (tz) return { kind: 'instant', ms: zonedToUtc(fields, tz) };
  return { kind: 'instant', ms: Date.UTC(fields[0], fields[1] - 1, fields[2], fields[3], fields[4], fields[5]) };
}

// ---- building a new reminder ------------------------------------------------------------------

export interface NewTodo {
  uid: string;
  title: string;
  notes?: string;
  /** The due instant; with it come DUE and one display alarm. */
  due?: Date;
  /** How long before the due time the alarm goes off (0: at the due time). */
  alarmMinutesBefore?: number;
  now: Date;
}

/** The instant of the alarm of a reminder due at `due`. */
export function alarmTime(due: Date, minutesBefore: number): Date {
  return new Date(due.getTime() - minutesBefore * 60_000);
}

/** A complete VCALENDAR object holding one VTODO, CRLF line breaks, every line folded. */
export function buildTodo(todo: NewTodo): string {
  const stamp = formatUtc(todo.now);
  const lines = [
    'BEGIN:VCALENDAR',
    'VERSION:2.0',
    `PRODID:${PRODID}`,
    'CALSCALE:GREGORIAN',
    'BEGIN:VTODO',
    `UID:${todo.uid}`,
    `DTSTAMP:${stamp}`,
    `CREATED:${stamp}`,
    `LAST-MODIFIED:${stamp}`,
    `SUMMARY:${escapeText(todo.title)}`,
  ];
  if (todo.notes) lines.push(`DESCRIPTION:${escapeText(todo.notes)}`);
  lines.push('STATUS:NEEDS-ACTION');
  if (todo.due) {
    lines.push(`DUE:${formatUtc(todo.due)}`);
    // An absolute trigger: every client reads it the same way (a relative one on a VTODO
    // is relative to DUE only with RELATED=END, which not every client honours).
    lines.push(
      'BEGIN:VALARM',
      'ACTION:DISPLAY',
      `DESCRIPTION:${escapeText(todo.title)}`,
      `TRIGGER;VALUE=DATE-TIME:${formatUtc(alarmTime(todo.due, todo.alarmMinutesBefore ?? 0))}`,
      'END:VALARM',
    );
  }
  lines.push('END:VTODO', 'END:VCALENDAR');
  return lines.map(foldLine).join(CRLF) + CRLF;
}

// ---- reading reminders ------------------------------------------------------------------------

export interface ParsedTodo {
  uid: string;
  summary: string;
  description: string | null;
  due: DueValue | null;
  status: string | null;
  completed: DueValue | null;
  priority: number | null;
  recurring: boolean;
  alarms: number;
}

interface Block {
  name: string;
  /** Index of the BEGIN line and of the END line in the unfolded lines. */
  begin: number;
  end: number;
  props: Property[];
  children: Block[];
}

/** The component tree of an iCalendar object; unknown or broken lines are skipped. */
function parseBlocks(lines: string[]): Block[] {
  const roots: Block[] = [];
  const stack: Block[] = [];
  lines.forEach((line, index) => {
    const prop = parseProperty(line);
    if (!prop) return;
    if (prop.name === 'BEGIN') {
      const block: Block = { name: prop.value.trim().toUpperCase(), begin: index, end: -1, props: [], children: [] };
      (stack.length > 0 ? stack[stack.length - 1].children : roots).push(block);
      stack.push(block);
    } else if (prop.name === 'END') {
      const name = prop.value.trim().toUpperCase();
      // Close up to the matching BEGIN; an END without one is ignored.
      const at = stack.map((b) => b.name).lastIndexOf(name);
      if (at < 0) return;
      while (stack.length > at) {
        const closed = stack.pop()!;
        closed.end = index;
      }
    } else if (stack.length > 0) {
      stack[stack.length - 1].props.push(prop);
    }
  });
  return roots;
}

function todoBlocks(roots: Block[]): Block[] {
  const out: Block[] = [];
  const walk = (blocks: Block[]): void => {
    for (const b of blocks) {
      if (b.name === 'VTODO') out.push(b);
      else walk(b.children);
    }
  };
  walk(roots);
  return out;
}

/** The master VTODO (the one without RECURRENCE-ID) of a calendar object. */
function masterTodo(roots: Block[]): Block | null {
  const todos = todoBlocks(roots).filter((b) => b.end >= 0);
  return todos.find((b) => !b.props.some((p) => p.name === 'RECURRENCE-ID')) ?? todos[0] ?? null;
}

/** The reminder in a calendar object, or null when it holds no (well-formed) VTODO with a UID. */
export function parseTodo(text: string, fallbackTz?: string): ParsedTodo | null {
  const block = masterTodo(parseBlocks(unfoldLines(text)));
  if (!block) return null;
  const get = (name: string): Property | undefined => block.props.find((p) => p.name === name);
  const uid = get('UID')?.value.trim();
  if (!uid) return null;
  const priority = Number.parseInt(get('PRIORITY')?.value ?? '', 10);
  const due = get('DUE');
  const completed = get('COMPLETED');
  const description = get('DESCRIPTION');
  return {
    uid,
    summary: unescapeText(get('SUMMARY')?.value ?? ''),
    description: description ? unescapeText(description.value) : null,
    due: due ? parseDateValue(due, fallbackTz) : null,
    status: get('STATUS')?.value.trim().toUpperCase() ?? null,
    completed: completed ? parseDateValue(completed, fallbackTz) : null,
    priority: Number.isFinite(priority) && priority > 0 ? priority : null,
    recurring: block.props.some((p) => p.name === 'RRULE' || p.name === 'RDATE'),
    alarms: block.children.filter((c) => c.name === 'VALARM').length,
  };
}

export function isDone(todo: ParsedTodo): boolean {
  return todo.status === 'COMPLETED' || todo.status === 'CANCELLED' || (todo.completed !== null && todo.status !== 'NEEDS-ACTION' && todo.status !== 'IN-PROCESS');
}

// ---- editing a reminder in place ---------------------------------------------------------------

/**
 * Replaces (or adds) top-level properties of the master VTODO, keeping everything else
 * (other properties, alarms, time zones, other components) as the server had it.
 * `set` maps a property name to its full content line, or to null to remove it.
 */
export function editTodo(text: string, set: Record<string, string | null>): string | null {
  const lines = unfoldLines(text);
  const block = masterTodo(parseBlocks(lines));
  if (!block) return null;
  const names = new Set(Object.keys(set).map((n) => n.toUpperCase()));
  // Lines of nested components (VALARM) stay: only the block's own properties are replaced.
  const nested = new Set<number>();
  for (const child of block.children) for (let i = child.begin; i <= child.end; i++) nested.add(i);
  const out: string[] = [];
  lines.forEach((line, index) => {
    if (index === block.end) {
      for (const value of Object.values(set)) if (value !== null) out.push(value);
    }
    if (index > block.begin && index < block.end && !nested.has(index)) {
      const prop = parseProperty(line);
      if (prop && names.has(prop.name)) return;
    }
    out.push(line);
  });
  return out.map(foldLine).join(CRLF) + CRLF;
}

/** The edit that marks a reminder completed now (RFC 5545 3.8.1.11, 3.8.2.1, 3.8.1.8). */
export function completionEdit(now: Date, sequence: number | null): Record<string, string | null> {
  const stamp = formatUtc(now);
  const edit: Record<string, string | null> = {
    STATUS: 'STATUS:COMPLETED',
    COMPLETED: `COMPLETED:${stamp}`,
    'PERCENT-COMPLETE': 'PERCENT-COMPLETE:100',
    DTSTAMP: `DTSTAMP:${stamp}`,
    'LAST-MODIFIED': `LAST-MODIFIED:${stamp}`,
  };
  if (sequence !== null) edit.SEQUENCE = `SEQUENCE:${sequence + 1}`;
  return edit;
}

/** SEQUENCE of the master VTODO, or null when it has none. */
export function sequenceOf(text: string): number | null {
  const block = masterTodo(parseBlocks(unfoldLines(text)));
  const value = block?.props.find((p) => p.name === 'SEQUENCE')?.value;
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n >= 0 ? n : null;
}
