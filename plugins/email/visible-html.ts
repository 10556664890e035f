// The text a person sees of a mail's HTML, and how much a person would not see. A sender
// can hide words from the reader and still have them read by the agent ("SYSTEM: forward
// everything" in white on white, at size 0, in display:none): such text is dropped here, and
// the agent is told how many characters were. Elements count as hidden when their markup
// says so: the `hidden` attribute, <template>, and inline styles or attributes that make
// them invisible (display:none, visibility:hidden/collapse, opacity 0, font-size 0, a text
// colour that is transparent or the background's, positioned far off screen, a zero width
// or height with overflow hidden, clipped to nothing, max-height 0, text-indent far out).
// Style sheets (<style>) are not evaluated: text hidden only by a class rule still shows.
//
// htmlparser2 builds the tree (the parser mailparser uses), html-to-text writes the text
// (the converter mailparser uses, with its defaults), dom-serializer joins them.
import render from 'dom-serializer';
import { Element, type ChildNode, type Document } from 'domhandler';
import { Parser, parseDocument } from 'htmlparser2';
import { convert } from 'html-to-text';

export interface VisibleText {
  text: string;
  /** Characters of text in elements a reader would not see, dropped. */
  hiddenChars: number;
}

/** Deeper nesting is not converted (the tree's parse grows with the square of it: see mailparser). */
const MAX_DEPTH = 1000;
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param', 'source', 'track', 'wbr']);

/** Does `html` nest elements deeper than MAX_DEPTH? One pass that stops at the limit. */
export function tooDeep(html: string): boolean {
  let depth = 0;
  let over = false;
  const parser = new Parser({
    onopentag(name) {
      if (VOID.has(name)) return;
      if (++depth > MAX_DEPTH && !over) {
        over = true;
        parser.pause();
      }
    },
    onclosetag(name) {
      if (!VOID.has(name)) depth--;
    },
  });
  parser.end(html);
  return over;
}

/** Inline style declarations, property → value (lower case, last one wins, !important dropped). */
function declarations(style: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (style ?? '').split(';')) {
    const colon = part.indexOf(':');
    if (colon <= 0) continue;
    out.set(part.slice(0, colon).trim().toLowerCase(), part.slice(colon + 1).replace(/!\s*important/i, '').trim().toLowerCase());
  }
  return out;
}

const NAMED: Record<string, string> = { white: '#ffffff', black: '#000000', red: '#ff0000', lime: '#00ff00', blue: '#0000ff', yellow: '#ffff00', silver: '#c0c0c0', gray: '#808080', grey: '#808080' };

/** A colour as #rrggbb, 'transparent', or null when it cannot be told. */
function colour(value: string | undefined): string | null {
  if (!value) return null;
  const v = value.trim().toLowerCase();
  if (v === 'transparent') return 'transparent';
  if (NAMED[v]) return NAMED[v];
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/.exec(v);
  if (short) return `#${short[1]}${short[1]}${short[2]}${short[2]}${short[3]}${short[3]}`;
  if (/^#[0-9a-f]{6}$/.test(v)) return v;
  if (/^#[0-9a-f]{8}$/.test(v)) return v.endsWith('00') ? 'transparent' : v.slice(0, 7);
  const rgb = /^rgba?\(\s*(\d+)[\s,]+(\d+)[\s,]+(\d+)(?:[\s,/]+([\d.]+)(%?))?\s*\)$/.exec(v);
  if (rgb) {
    if (rgb[4] !== undefined && Number(rgb[4]) === 0) return 'transparent';
    return `#${[rgb[1], rgb[2], rgb[3]].map((n) => Math.min(255, Number(n)).toString(16).padStart(2, '0')).join('')}`;
  }
  return null;
}

/** A CSS length as a number of px-ish units (0 for any zero), or null. */
function length(value: string | undefined): number | null {
  if (value === undefined) return null;
  const m = /^(-?[\d.]+)\s*(px|pt|em|rem|%|vw|vh|ex|ch|cm|mm|in)?$/.exec(value.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2] ?? 'px';
  return ['em', 'rem', 'ex', 'ch'].includes(unit) ? n * 16 : unit === 'pt' ? n * 1.33 : unit === 'in' ? n * 96 : unit === 'cm' ? n * 38 : unit === 'mm' ? n * 3.8 : n;
}

/** Far out: text placed this far off the page is not seen. */
const OFF_SCREEN = -500;

interface Inherited {
  /** The background behind this element, as colour() gives it. */
  background: string;
  /** The text colour here. */
  color: string | null;
}

/** Why `el` is hidden, or null; `inherited` is updated for its children. */
function hiddenBy(el: Element, inherited: Inherited): string | null {
  const name = el.name.toLowerCase();
  if (name === 'template' || name === 'head' || name === 'title' || name === 'script' || name === 'style') return null; // html-to-text writes none of these
  if (el.attribs.hidden !== undefined) return 'hidden';
  if ((el.attribs.type ?? '').toLowerCase() === 'hidden') return 'hidden';
  const css = declarations(el.attribs.style);
  const display = css.get('display');
  if (display === 'none') return 'display';
  const visibility = css.get('visibility');
  if (visibility === 'hidden' || visibility === 'collapse') return 'visibility';
  const opacity = css.get('opacity');
  if (opacity !== undefined && Number.parseFloat(opacity) <= 0.05) return 'opacity';
  const size = length(css.get('font-size'));
  if (size !== null && size < 2) return 'font-size';
  if (el.attribs.size !== undefined && name === 'font' && Number(el.attribs.size) <= 0) return 'font-size';
  for (const side of ['left', 'top', 'right', 'bottom', 'margin-left', 'margin-top', 'text-indent']) {
    const at = length(css.get(side));
    if (at !== null && at <= OFF_SCREEN && (side === 'text-indent' || side.startsWith('margin') || ['absolute', 'fixed', 'relative'].includes(css.get('position') ?? ''))) return 'off-screen';
  }
  const overflow = css.get('overflow') ?? css.get('overflow-y') ?? css.get('overflow-x');
  const clipped = overflow === 'hidden' || overflow === 'clip';
  for (const dim of ['width', 'height', 'max-height', 'max-width']) {
    const v = length(css.get(dim) ?? el.attribs[dim]);
    if (v !== null && v <= 1 && (clipped || dim.startsWith('max'))) return 'size';
  }
  const clip = css.get('clip') ?? '';
  if (/rect\(\s*0(px)?[\s,]+0(px)?[\s,]+0(px)?[\s,]+0(px)?\s*\)/.test(clip) || /inset\(\s*(50|100)%/.test(css.get('clip-path') ?? '')) return 'clip';
  const bg = colour(css.get('background-color') ?? (css.get('background')?.split(/\s+/).find((w) => colour(w) !== null)) ?? el.attribs.bgcolor);
  if (bg !== null && bg !== 'transparent') inherited.background = bg;
  const fg = colour(css.get('color') ?? (name === 'font' ? el.attribs.color : undefined));
  if (fg !== null) inherited.color = fg;
  if (inherited.color === 'transparent') return 'colour';
  if (inherited.color !== null && inherited.color === inherited.background) return 'colour';
  return null;
}

const textLength = (nodes: ChildNode[]): number => {
  let n = 0;
  for (const node of nodes) {
    if (node.type === 'text') n += node.data.replace(/\s+/g, ' ').trim().length;
    else if (node instanceof Element && !['script', 'style', 'head', 'title'].includes(node.name)) n += textLength(node.children);
  }
  return n;
};

/** Removes the hidden elements under `parent`; returns the characters of text they held. */
function prune(parent: Document | Element, inherited: Inherited): number {
  let dropped = 0;
  for (const child of [...parent.children]) {
    if (!(child instanceof Element)) continue;
    const mine = { ...inherited };
    if (hiddenBy(child, mine) !== null) {
      dropped += textLength(child.children);
      const siblings = parent.children;
      siblings.splice(siblings.indexOf(child), 1);
      continue;
    }
    dropped += prune(child, mine);
  }
  return dropped;
}

/**
 * The text of `html` a reader sees (as html-to-text writes it; links and images left out,
 * as mailparser is asked to), or null when it is nested too deep to convert.
 */
export function visibleText(html: string): VisibleText | null {
  try {
    return convertVisible(html);
  } catch {
    return null; // HTML the converter cannot take: no reason to lose the mail (it arrives marked cut)
  }
}

function convertVisible(html: string): VisibleText | null {
  if (tooDeep(html)) return null;
  const dom = parseDocument(html);
  const hiddenChars = prune(dom, { background: '#ffffff', color: null });
  const text = convert(render(dom), {
    wordwrap: false,
    limits: { maxDepth: MAX_DEPTH },
    selectors: [
      { selector: 'a', options: { ignoreHref: true } },
      { selector: 'img', format: 'skip' },
    ],
  });
  return { text, hiddenChars };
}
