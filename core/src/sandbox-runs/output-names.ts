// The names a run may give the files it hands back: what lands in the group's workspace
// under runs/<run-id>/, and what a person later sees in a chat or the console. A name is
// refused, never changed: a path of plain components (no "..", no "."), no control,
// invisible or order-changing character (the same classes the core's one sanitizer shows
// as escapes: text/escape.ts), nothing a decoder had to replace, and bounded lengths.
import { bound, escapeText, hidden } from '../text/escape.js';

export const MAX_NAME_CHARS = 200;
export const MAX_COMPONENT_BYTES = 255;
export const MAX_DEPTH = 4;

/** Why `name` (a path relative to /out, "/"-separated) is refused, or null when it is fine. */
export function refuseName(name: string): string | null {
  if (name.length === 0) return 'an empty name';
  if ([...name].length > MAX_NAME_CHARS) return `a name longer than ${MAX_NAME_CHARS} characters`;
  if (name.startsWith('/')) return 'an absolute path';
  const parts = name.split('/');
  if (parts.length > MAX_DEPTH) return `more than ${MAX_DEPTH} levels of folders`;
  for (const part of parts) {
    if (part === '' || part === '.' || part === '..') return 'a path with an empty, "." or ".." part';
    if (Buffer.byteLength(part) > MAX_COMPONENT_BYTES) return `a part longer than ${MAX_COMPONENT_BYTES} bytes`;
  }
  for (const ch of name) {
    if (ch === '\uFFFD') return 'bytes that are not UTF-8';
    if (ch === '\\') return 'a backslash';
    if (/\p{Cc}/u.test(ch) || (ch !== ' ' && hidden(ch))) return 'a control, invisible or order-changing character';
  }
  return null;
}

/** A name as a person or the agent may be shown it: every hidden character as a visible escape, bounded. */
export function showName(name: string): string {
  return bound(escapeText(name), MAX_NAME_CHARS + 40);
}
