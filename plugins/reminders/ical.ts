// The reminders as iCalendar VTODOs, on the SDK's ical.js helpers: build a new one, read
// the ones a server returns, mark one completed in place (every property and alarm other
// clients put there stays). Pure functions, no I/O.
import { ICAL, masterComponent, newCalendar, parseCalendar, propertyText, propertyTime, serializeCalendar, setText, utcTime, type CalendarTime } from '#sdk/calendar';

export const PRODID = '-//Carapace//Reminders 1.0//EN';

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

/** A complete VCALENDAR object holding one VTODO. */
export function buildTodo(todo: NewTodo): string {
  const root = newCalendar(PRODID);
  const vtodo = new ICAL.Component('vtodo');
  const stamp = utcTime(todo.now.getTime());
  vtodo.updatePropertyWithValue('uid', todo.uid);
  vtodo.updatePropertyWithValue('dtstamp', stamp);
  vtodo.updatePropertyWithValue('created', stamp);
  vtodo.updatePropertyWithValue('last-modified', stamp);
  // The agent's words: TEXT as RFC 5545 writes it, or refused naming the field (INVALID_TEXT).
  setText(vtodo, 'summary', todo.title, 'title');
  if (todo.notes) setText(vtodo, 'description', todo.notes, 'notes');
  vtodo.updatePropertyWithValue('status', 'NEEDS-ACTION');
  if (todo.due) {
    vtodo.updatePropertyWithValue('due', utcTime(todo.due.getTime()));
    // An absolute trigger: every client reads it the same way (a relative one on a VTODO
    // is relative to DUE only with RELATED=END, which not every client honours).
    const alarm = new ICAL.Component('valarm');
    alarm.updatePropertyWithValue('action', 'DISPLAY');
    setText(alarm, 'description', todo.title, 'title');
    // ical.js writes VALUE=DATE-TIME itself for a time in a TRIGGER (its default type is a duration).
    alarm.updatePropertyWithValue('trigger', utcTime(alarmTime(todo.due, todo.alarmMinutesBefore ?? 0).getTime()));
    vtodo.addSubcomponent(alarm);
  }
  root.addSubcomponent(vtodo);
  return serializeCalendar(root);
}

export interface ParsedTodo {
  uid: string;
  summary: string;
  description: string | null;
  due: CalendarTime | null;
  status: string | null;
  completed: CalendarTime | null;
  priority: number | null;
  recurring: boolean;
  alarms: number;
}

/** The reminder in a calendar object, or null when it holds no (readable) VTODO with a UID. */
export function parseTodo(text: string, fallbackTz?: string): ParsedTodo | null {
  const root = parseCalendar(text);
  const vtodo = root && masterComponent(root, 'VTODO');
  if (!vtodo) return null;
  const uid = propertyText(vtodo, 'uid').trim();
  if (!uid) return null;
  const priority = Number.parseInt(propertyText(vtodo, 'priority'), 10);
  const status = propertyText(vtodo, 'status').trim().toUpperCase();
  return {
    uid,
    summary: propertyText(vtodo, 'summary'),
    description: vtodo.hasProperty('description') ? propertyText(vtodo, 'description') : null,
    due: propertyTime(vtodo, 'due', fallbackTz),
    status: status || null,
    completed: propertyTime(vtodo, 'completed', fallbackTz),
    priority: Number.isFinite(priority) && priority > 0 ? priority : null,
    recurring: vtodo.hasProperty('rrule') || vtodo.hasProperty('rdate'),
    alarms: vtodo.getAllSubcomponents('valarm').length,
  };
}

export function isDone(todo: ParsedTodo): boolean {
  return todo.status === 'COMPLETED' || todo.status === 'CANCELLED' || (todo.completed !== null && todo.status !== 'NEEDS-ACTION' && todo.status !== 'IN-PROCESS');
}

/**
 * The object with its master VTODO marked completed at `now` (RFC 5545 3.8.1.11, 3.8.2.1,
 * 3.8.1.8; SEQUENCE raised when present); everything else as it was. Null when unreadable.
 */
export function completeTodo(text: string, now: Date): string | null {
  const root = parseCalendar(text);
  const vtodo = root && masterComponent(root, 'VTODO');
  if (!root || !vtodo) return null;
  const stamp = utcTime(now.getTime());
  vtodo.updatePropertyWithValue('status', 'COMPLETED');
  vtodo.updatePropertyWithValue('completed', stamp);
  vtodo.updatePropertyWithValue('percent-complete', 100);
  vtodo.updatePropertyWithValue('dtstamp', stamp);
  vtodo.updatePropertyWithValue('last-modified', stamp);
  const sequence = Number.parseInt(propertyText(vtodo, 'sequence'), 10);
  if (Number.isFinite(sequence) && sequence >= 0) vtodo.updatePropertyWithValue('sequence', sequence + 1);
  return serializeCalendar(root);
}
