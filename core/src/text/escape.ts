// Text a person or an agent reads, with nothing hidden in it (DESIGN decisions 12 and 16):
// every character a person cannot see, or whose order they cannot trust, shown as a visible
// escape (⟦U+202E⟧), never stripped. One sanitizer for everything: the approval prompts
// (confirm/describe-call.ts) and, through `#sdk`, what plugins hand an agent of what a
// stranger wrote (a mail's subject, body, sender's name, attachment names).
//
// Character classes come from the Unicode database Node carries (regex property escapes),
// not from tables of our own.

/** At least this many of the same escaped character in a row are shown as one escape with a count. */
const COLLAPSE_RUN = 4;

// ---- classes of characters ----------------------------------------------------------------

/** A person cannot check these at all: refused in high-risk calls unless a tool is exempt. */
export const UNCHECKABLE = /[\u{E0000}-\u{E007F}\u202A-\u202E\u2066-\u2069]/u;
export const TAG = /^[\u{E0000}-\u{E007F}]$/u;
const BIDI = /^\p{Bidi_Control}$/u;
const ZERO_WIDTH = /^(?=\p{Cf})\p{Default_Ignorable_Code_Point}$/u;
/**
 * Shown as an escape: format (Cf), private use (Co), unassigned (Cn), lone surrogates (Cs),
 * line and paragraph separators (Zl, Zp), spaces other than U+0020 (Zs), controls (Cc)
 * other than \n and \t; and the escape's own opening bracket, so that text cannot fake one.
 */
const HIDDEN = /[\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\p{Cc}\p{Zs}]/u;
export const ESCAPE_OPEN = '⟦';
/** Whole emoji (ZWJ families, subdivision flags with their tag characters) are left alone. */
export const EMOJI = new RegExp('\\p{RGI_Emoji}', 'gv');

export type Kind = 'tag' | 'bidi' | 'zero_width' | 'format' | 'private_use' | 'unassigned' | 'surrogate' | 'separator' | 'space' | 'control';


export function kindOf(ch: string): Kind {
  if (TAG.test(ch)) return 'tag';
  if (BIDI.test(ch)) return 'bidi';
  if (ZERO_WIDTH.test(ch)) return 'zero_width';
  if (/^\p{Cf}$/u.test(ch)) return 'format';
  if (/^\p{Co}$/u.test(ch)) return 'private_use';
  if (/^\p{Cs}$/u.test(ch)) return 'surrogate';
  if (/^\p{Cn}$/u.test(ch)) return 'unassigned';
  if (/^[\p{Zl}\p{Zp}]$/u.test(ch)) return 'separator';
  if (/^\p{Zs}$/u.test(ch)) return 'space';
  return 'control';
}

/** Is this one character shown as an escape? */
export function hidden(ch: string): boolean {
  if (ch === ' ' || ch === '\n' || ch === '\t') return false;
  return HIDDEN.test(ch) || ch === ESCAPE_OPEN;
}

/** The characters of `text` (code points; a lone surrogate is one), with emoji kept whole. */
export function pieces(text: string): { s: string; emoji: boolean }[] {
  const out: { s: string; emoji: boolean }[] = [];
  let at = 0;
  const plain = (to: number): void => {
    for (const ch of text.slice(at, to)) out.push({ s: ch, emoji: false });
  };
  for (const m of text.matchAll(EMOJI)) {
    plain(m.index);
    out.push({ s: m[0], emoji: true });
    at = m.index + m[0].length;
  }
  plain(text.length);
  return out;
}

export const hex = (ch: string): string => (ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
export const count = (n: number): string => n.toLocaleString('en-US');

/**
 * `text` with every hidden character as a visible escape: `⟦U+202E⟧`, and a run of the
 * same one as `⟦U+200B ×18,000⟧`. Nothing is removed.
 */
export function escapeText(text: string): string {
  const parts = pieces(text);
  let out = '';
  for (let i = 0; i < parts.length; ) {
    const p = parts[i];
    if (p.emoji || !hidden(p.s)) {
      out += p.s;
      i++;
      continue;
    }
    let j = i + 1;
    while (j < parts.length && !parts[j].emoji && parts[j].s === p.s) j++;
    const n = j - i;
    if (n >= COLLAPSE_RUN) out += `${ESCAPE_OPEN}U+${hex(p.s)} ×${count(n)}⟧`;
    else out += `${ESCAPE_OPEN}U+${hex(p.s)}⟧`.repeat(n);
    i = j;
  }
  return out;
}

/**
 * `text` (escaped) cut to about `max` characters, head and tail kept, saying how many
 * characters were cut; an escape is never cut in two.
 */
export function bound(text: string, max: number): string {
  if (text.length <= max) return text;
  const units = text.match(/⟦[^⟦⟧]*⟧|[\s\S]/gu) ?? [];
  const tailBudget = Math.floor(max / 4);
  const headBudget = max - tailBudget;
  let head = 0;
  for (let used = 0; head < units.length && used + units[head].length <= headBudget; head++) used += units[head].length;
  let tail = units.length;
  for (let used = 0; tail > head && used + units[tail - 1].length <= tailBudget; tail--) used += units[tail - 1].length;
  if (tail <= head) return text;
  return `${units.slice(0, head).join('')} …[${count(tail - head)} characters cut]… ${units.slice(tail).join('')}`;
}
