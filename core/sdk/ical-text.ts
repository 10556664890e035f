// Text a plugin writes into an iCalendar object for an agent: a title, a location, notes.
// ical.js escapes what RFC 5545 TEXT can carry (backslash, semicolon, comma, and a line
// feed as \n) but writes every other control character as it is, and to the next parser a
// lone carriage return is a line end: on Radicale the rest of a title became a property of
// its own (an ATTENDEE) or a whole second VEVENT (an override of the same event). TEXT has
// no form for these (its grammar leaves CONTROL out, RFC 5545 3.3.11), and nothing a person
// means needs them, so they are refused, naming the field, and never replaced: what the
// server stores is what the agent wrote, or nothing.
import type ICAL from 'ical.js';
import { ToolError } from './index.js';

/** The code of every refusal here: the agent can send the text again without the character. */
export const INVALID_TEXT = 'INVALID_TEXT';

/**
 * Control characters (Unicode Cc) other than TAB and LF: C0, DEL and C1 (U+0085 is a line
 * end to some readers); and, with the `u` flag, lone surrogates, which have no UTF-8 form
 * (they would arrive as U+FFFD, not as written).
 */
// eslint-disable-next-line no-control-regex
const UNREPRESENTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\ud800-\udfff]/u;

/** Line structure that is not ical.js's own CRLF (a CR or LF alone), or a NUL (the end of a C string). */
// eslint-disable-next-line no-control-regex
const STRAY_BREAK = /\r(?!\n)|(?<!\r)\n|\u0000/;

const hex = (codePoint: number): string => `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;

/** The first character of `value` TEXT cannot carry, or null. */
export function unrepresentable(value: string): { index: number; codePoint: number } | null {
  const found = UNREPRESENTABLE.exec(value);
  return found ? { index: found.index, codePoint: found[0].codePointAt(0)! } : null;
}

/** `value` as it is, if TEXT can carry it; refused (INVALID_TEXT) naming `field` otherwise. */
export function checkText(value: string, field: string): string {
  const found = unrepresentable(value);
  if (!found) return value;
  const surrogate = found.codePoint >= 0xd800 && found.codePoint <= 0xdfff;
  const what = surrogate ? `an unpaired surrogate (${hex(found.codePoint)})` : `a control character (${hex(found.codePoint)})`;
  throw new ToolError({
    code: INVALID_TEXT,
    message: `${field} holds ${what} at character ${found.index + 1}, which calendar text cannot carry: write line breaks as \\n only and leave other control characters out, then try again`,
    retriable: false,
  });
}

/**
 * Sets the text property `name` of `component` to `value` (the agent's `field`), replacing
 * every earlier one with its parameters; refused as checkText says.
 */
export function setText(component: ICAL.Component, name: string, value: string, field: string): void {
  checkText(value, field);
  component.removeAllProperties(name);
  component.addPropertyWithValue(name, value);
}

/**
 * `text` (an object ical.js wrote) unless a line break or NUL other than its own CRLF is in
 * it: a value written without setText, a parameter, or a foreign object's text would be
 * structure to the server. Refused (INVALID_TEXT) before anything is sent.
 */
export function checkLineStructure(text: string): string {
  const found = STRAY_BREAK.exec(text);
  if (!found) return text;
  throw new ToolError({
    code: INVALID_TEXT,
    message: `a value of this calendar object holds a control character (${hex(found[0].codePointAt(0)!)}) that iCalendar cannot carry: nothing was written`,
    retriable: false,
  });
}
