// What a person approves (DESIGN decision 12): one structured description of a high-risk
// call, made here and nowhere else, from which every prompt (Telegram, console, CLI) is
// rendered. Every character a person cannot see, or whose order they cannot trust, is
// shown as a visible escape (⟦U+202E⟧), never stripped; what is odd about the text
// (hidden characters, padding, a Cyrillic letter in a Latin word) is said first. The
// answer binds to `hash`, the sha256 of the canonical arguments shown and of what the
// plugin said they refer to (call-state.ts).
//
// The escaping itself is text/escape.ts's, shared with what plugins hand an agent.
import { createHash } from 'node:crypto';
import stringify from 'safe-stable-stringify';
import type { CallState } from './call-state.js';
import { bound, count, EMOJI, ESCAPE_OPEN, escapeText, hex, hidden, kindOf, pieces, TAG, UNCHECKABLE, type Kind } from '../text/escape.js';

/** Escaping and bounding are the one sanitizer's (text/escape.ts); re-exported for the prompts' renderers. */
export { bound, escapeText };

export interface CallDescription {
  tool: string;
  group: string;
  /** The arguments as safe-stable-stringify writes them (sorted keys): what the hash covers. */
  canonical: string;
  /** sha256 (hex) of `canonical` and the state's lines: an answer that names another hash is refused. */
  hash: string;
  /**
   * What the call refers to on the host, as its plugin says (escaped, each line bounded),
   * shown next to the buttons; null for a tool that describes nothing.
   */
  state: string[] | null;
  /** One line per top-level argument, escaped, each at most about SUMMARY_LINE characters. */
  summary: string[];
  /** True when a summary line was shortened: `full` says more than the summary. */
  summary_cut: boolean;
  /** The arguments pretty-printed and escaped (at most FULL_LIMIT characters). */
  full: string;
  /**
   * Each string argument that has lines (a file's content, a mail's body), escaped with its
   * line breaks kept, so that a person reads it as it will be written; at most FULL_LIMIT
   * characters in all. `field` is where it sits, with the `path` beside it when it has one.
   */
  texts: { field: string; text: string }[];
  /** Said before anything else: hidden characters by kind, padding, mixed scripts. */
  warnings: string[];
}

/** A summary line's value is cut to about this many characters (head and tail kept). */
export const SUMMARY_LINE = 300;
/** The full text is cut beyond this (a note says how much). */
export const FULL_LIMIT = 256 * 1024;
/** This many repeated blank or invisible characters in a row are padding. */
export const PADDING_RUN = 20;

const KIND_WORDS: Record<Kind, [string, string]> = {
  tag: ['invisible tag character', 'invisible tag characters'],
  bidi: ['bidi control (reorders text)', 'bidi controls (reorder text)'],
  zero_width: ['zero-width character', 'zero-width characters'],
  format: ['invisible format character', 'invisible format characters'],
  private_use: ['private-use character', 'private-use characters'],
  unassigned: ['unassigned code point', 'unassigned code points'],
  surrogate: ['broken (lone surrogate) character', 'broken (lone surrogate) characters'],
  separator: ['line/paragraph separator', 'line/paragraph separators'],
  space: ['unusual space', 'unusual spaces'],
  control: ['control character', 'control characters'],
};

// ---- what is odd about the text -------------------------------------------------------------

interface Findings {
  kinds: Map<Kind, number>;
  /** Visible reading of tag characters (they mirror ASCII), for the warning. */
  tagText: string;
  padding: { field: string; length: number }[];
  mixed: { field: string; word: string; scripts: string }[];
}

const SCRIPTS: [string, RegExp][] = [
  ['Cyrillic', /\p{Script=Cyrillic}/u],
  ['Greek', /\p{Script=Greek}/u],
  ['Armenian', /\p{Script=Armenian}/u],
  ['Cherokee', /\p{Script=Cherokee}/u],
];

function inspect(text: string, field: string, found: Findings): void {
  const parts = pieces(text);
  let run = 0;
  const endRun = (): void => {
    if (run >= PADDING_RUN) found.padding.push({ field, length: run });
    run = 0;
  };
  for (const p of parts) {
    const invisible = !p.emoji && hidden(p.s) && p.s !== ESCAPE_OPEN;
    if (invisible) {
      const kind = kindOf(p.s);
      found.kinds.set(kind, (found.kinds.get(kind) ?? 0) + 1);
      if (kind === 'tag') {
        const cp = p.s.codePointAt(0)! - 0xe0000;
        if (cp >= 0x20 && cp < 0x7f) found.tagText += String.fromCodePoint(cp);
      }
    }
    if (invisible || (!p.emoji && /^\s$/u.test(p.s))) run++;
    else endRun();
  }
  endRun();
  for (const m of text.matchAll(/[\p{L}\p{M}]+/gu)) {
    const word = m[0];
    if (!/\p{Script=Latin}/u.test(word)) continue;
    const others = SCRIPTS.filter(([, re]) => re.test(word)).map(([name]) => name);
    if (others.length > 0) found.mixed.push({ field, word, scripts: `Latin + ${others.join(' + ')}` });
  }
}

/** Every string in `value` (keys too) with the dotted path it sits at. */
function* strings(value: unknown, path: string[] = []): Generator<[string, string]> {
  if (typeof value === 'string') yield [value, path.join('.')];
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) yield* strings(v, [...path, String(i)]);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      yield [k, [...path, k].join('.')];
      yield* strings(v, [...path, k]);
    }
  }
}

function warningsOf(found: Findings): string[] {
  const out: string[] = [];
  for (const [kind, n] of found.kinds) {
    const [one, many] = KIND_WORDS[kind];
    let line = `${count(n)} ${n === 1 ? one : many}`;
    if (kind === 'tag' && found.tagText) line += `; they spell: ${JSON.stringify(bound(found.tagText, 160))}`;
    out.push(line);
  }
  for (const p of found.padding.slice(0, 3)) out.push(`padding: ${count(p.length)} blank or invisible characters in a row in ${p.field ? `"${escapeText(p.field)}"` : 'the arguments'}`);
  if (found.padding.length > 3) out.push(`padding: ${found.padding.length - 3} more runs`);
  for (const m of found.mixed.slice(0, 3)) {
    const marked = Array.from(m.word).map((ch) => (/\p{Script=Latin}/u.test(ch) || !/\p{L}/u.test(ch) ? ch : `${ch}(U+${hex(ch)})`)).join('');
    out.push(`mixed scripts in one word (${m.scripts}): ${escapeText(bound(marked, 80))} in ${m.field ? `"${escapeText(m.field)}"` : 'the arguments'}`);
  }
  if (found.mixed.length > 3) out.push(`mixed scripts: ${found.mixed.length - 3} more words`);
  return out;
}

// ---- the description ------------------------------------------------------------------------

/** Every string value with a line break, where it sits (and the `path` string beside it, if any). */
function* texts(value: unknown, path: string[] = [], beside?: unknown): Generator<{ field: string; text: string }> {
  if (typeof value === 'string') {
    if (value.includes('\n')) yield { field: typeof beside === 'string' && path.at(-1) !== 'path' ? `${path.join('.')} (${beside})` : path.join('.'), text: value };
  } else if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) yield* texts(v, [...path, String(i)]);
  } else if (value && typeof value === 'object') {
    const near = (value as Record<string, unknown>).path;
    for (const [k, v] of Object.entries(value)) yield* texts(v, [...path, k], near);
  }
}

function shownTexts(args: Record<string, unknown>): { field: string; text: string }[] {
  const out: { field: string; text: string }[] = [];
  let left = FULL_LIMIT;
  for (const { field, text } of texts(args)) {
    // Past the limit a text is still named, and its head and tail shown (bound: no escape cut in two).
    const shown = bound(escapeText(text), Math.max(left, SUMMARY_LINE));
    out.push({ field: bound(escapeText(field), SUMMARY_LINE), text: shown });
    left -= shown.length;
  }
  return out;
}

/** Arguments as compact JSON for one summary line (strings quoted, \n shown as \n). */
const compact = (value: unknown): string => JSON.stringify(value) ?? String(value);

export function canonicalArguments(args: unknown): string {
  return stringify(args) ?? '';
}

export function hashOf(canonical: string): string {
  return createHash('sha256').update(canonical).digest('hex');
}

export function describeCall(tool: string, group: string, args: Record<string, unknown>, state: CallState | null = null): CallDescription {
  const canonical = canonicalArguments(args);
  const found: Findings = { kinds: new Map(), tagText: '', padding: [], mixed: [] };
  for (const [text, field] of strings(args)) inspect(text, field, found);
  const facts = state && 'lines' in state ? state.lines : [];
  for (const line of facts) inspect(line, 'what it refers to', found);
  let summaryCut = false;
  const summary = Object.entries(args).map(([key, value]) => {
    const shown = escapeText(compact(value));
    const cut = bound(shown, SUMMARY_LINE);
    if (cut !== shown || (value !== null && typeof value === 'object')) summaryCut = true;
    return `${escapeText(key)}: ${cut}`;
  });
  let full = escapeText(JSON.stringify(args, null, 2) ?? '{}');
  if (facts.length > 0) full += `\n\nWhat it refers to (from the plugin):\n${escapeText(facts.join('\n'))}`;
  if (full.length > FULL_LIMIT) full = `${full.slice(0, FULL_LIMIT)}\n…[${count(full.length - FULL_LIMIT)} more characters not shown]`;
  const shownState = state === null ? null : 'lines' in state ? facts.map((line) => bound(escapeText(line), SUMMARY_LINE)) : [];
  if (shownState && facts.some((line, i) => shownState[i] !== escapeText(line))) summaryCut = true;
  const warnings = warningsOf(found);
  if (state && 'unavailable' in state) warnings.unshift(`What this call refers to could not be told (${bound(escapeText(state.unavailable), 200)}): check it yourself before approving.`);
  const hash = hashOf(state !== null ? `${canonical}\n${JSON.stringify(state)}` : canonical);
  return { tool, group, canonical, hash, state: shownState, summary, summary_cut: summaryCut, full, texts: shownTexts(args), warnings };
}

/**
 * The first string in `args` holding a character no person can check (tag characters,
 * bidi embeddings, overrides and isolates), outside whole emoji: its path and what it holds.
 */
export function uncheckable(args: unknown): { field: string; kinds: string } | null {
  for (const [text, field] of strings(args)) {
    const rest = text.replace(EMOJI, '');
    if (!UNCHECKABLE.test(rest)) continue;
    let tags = 0;
    let bidi = 0;
    for (const ch of rest) {
      if (TAG.test(ch)) tags++;
      else if (UNCHECKABLE.test(ch)) bidi++;
    }
    const kinds = [tags ? `${count(tags)} invisible tag character${tags === 1 ? '' : 's'} (U+E0000–U+E007F)` : '', bidi ? `${count(bidi)} bidi control${bidi === 1 ? '' : 's'} (U+202A–U+202E, U+2066–U+2069)` : '']
      .filter(Boolean)
      .join(' and ');
    return { field, kinds };
  }
  return null;
}
