// Whether an element, or the text directly in it, is one a reader would not see, from its
// declared style (cascade.ts: the sheets' rules and its inline style, one map either way)
// and its markup. Two kinds, as in CSS:
// - what hides an element and everything in it, whatever the descendants say: display:none,
//   opacity 0, positioned far off screen, zero size with overflow hidden, clipped to
//   nothing, max-height 0, text-indent far out, the `hidden` attribute, <template>;
// - what is inherited and a descendant can undo: colour (transparent, or the background's),
//   font size (under 2 px), visibility:hidden. Such an element's own text is hidden; a child
//   that sets a visible colour, an absolute font size or visibility:visible is seen.
import type { Element } from 'domhandler';

/** The declarations read here: the only ones the cascade keeps. */
const PROPERTIES = new Set([
  'display', 'visibility', 'opacity', 'font-size', 'color', 'background', 'background-color',
  'position', 'left', 'top', 'right', 'bottom', 'margin-left', 'margin-top', 'text-indent',
  'overflow', 'overflow-x', 'overflow-y', 'width', 'height', 'max-height', 'max-width', 'clip', 'clip-path',
]);
export const relevant = (property: string): boolean => PROPERTIES.has(property);

export type Declared = ReadonlyMap<string, string>;

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
/** Text smaller than this (px) is not read. */
const MIN_FONT_PX = 2;
/** A browser's default font size, px. */
const DEFAULT_FONT_PX = 16;

/** Why `el` and everything in it is hidden, or null. */
export function hiddenBy(el: Element, css: Declared): string | null {
  // A <template>'s content is never rendered (html-to-text would write it).
  if (el.name.toLowerCase() === 'template') return 'template';
  if (el.attribs.hidden !== undefined) return 'hidden';
  if ((el.attribs.type ?? '').toLowerCase() === 'hidden') return 'hidden';
  if (css.get('display') === 'none') return 'display';
  const opacity = css.get('opacity');
  if (opacity !== undefined && Number.parseFloat(opacity) <= 0.05) return 'opacity';
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
  return null;
}

/** What an element's text inherits from its ancestors (or they put behind it). */
export interface Inherited {
  /** The background behind this element, as colour() gives it. */
  background: string;
  /** The text colour, or null when none was set (the reader's default). */
  color: string | null;
  /** The font size in px, or null when none was set (the default). */
  fontSize: number | null;
  visible: boolean;
}

export const PAGE: Inherited = { background: '#ffffff', color: null, fontSize: null, visible: true };

const KEYWORD_PX: Record<string, number> = { 'xx-small': 9, 'x-small': 10, small: 13, medium: 16, large: 18, 'x-large': 24, 'xx-large': 32, 'xxx-large': 48 };
/** <font size=1…7> in px (HTML's legacy sizes). */
const FONT_ATTR_PX = [0, 10, 13, 16, 18, 24, 32, 48];

/** The font size an element declares, given its parent's: relative units scale the parent's (0 stays 0). */
function fontSize(value: string | undefined, parent: number | null): number | null {
  if (value === undefined) return parent;
  const v = value.trim();
  const base = parent ?? DEFAULT_FONT_PX;
  if (v === 'inherit' || v === 'unset') return parent;
  if (v === 'initial' || v === 'revert') return DEFAULT_FONT_PX;
  if (KEYWORD_PX[v] !== undefined) return KEYWORD_PX[v];
  if (v === 'smaller') return base / 1.2;
  if (v === 'larger') return base * 1.2;
  const relative = /^(-?[\d.]+)\s*(em|%|ex|ch)$/.exec(v);
  if (relative) return (base * Number(relative[1]) * (relative[2] === '%' ? 0.01 : relative[2] === 'em' ? 1 : 0.5));
  return length(v) ?? parent; // calc() and such: not told, the parent's stands
}

/** The inherited state for `el`'s own text and its children. */
export function inherit(el: Element, css: Declared, parent: Inherited): Inherited {
  const name = el.name.toLowerCase();
  const out = { ...parent };
  const bg = colour(css.get('background-color') ?? (css.get('background')?.split(/\s+/).find((w) => colour(w) !== null)) ?? el.attribs.bgcolor);
  if (bg !== null && bg !== 'transparent') out.background = bg;
  const fg = colour(css.get('color') ?? (name === 'font' ? el.attribs.color : undefined));
  if (fg !== null) out.color = fg;
  // A style's font-size beats the <font size> attribute (a presentational hint).
  const attrSize = name === 'font' && el.attribs.size !== undefined ? Number(el.attribs.size) : Number.NaN;
  const fromAttr = Number.isNaN(attrSize) ? undefined : attrSize <= 0 ? '0' : `${FONT_ATTR_PX[Math.min(7, Math.round(attrSize))] ?? DEFAULT_FONT_PX}px`;
  out.fontSize = fontSize(css.get('font-size') ?? fromAttr, parent.fontSize);
  const visibility = css.get('visibility');
  if (visibility === 'hidden' || visibility === 'collapse') out.visible = false;
  else if (visibility === 'visible') out.visible = true;
  return out;
}

/** Why text with this inherited state is not seen, or null. */
export function textHiddenBy(state: Inherited): string | null {
  if (!state.visible) return 'visibility';
  if (state.fontSize !== null && state.fontSize < MIN_FONT_PX) return 'font-size';
  if (state.color === 'transparent') return 'colour';
  if (state.color !== null && state.color === state.background) return 'colour';
  return null;
}
