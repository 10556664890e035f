// Each element's own style, as far as hiding goes: the mail's sheet rules that match it
// (style-sheets.ts, matched by bounded-select.ts) and its inline `style`, merged with CSS's
// precedence: a later rule beats an earlier one, a more specific selector a less specific
// one, an inline declaration any sheet's, and `!important` all of those (an important sheet
// rule beats a normal inline one; an important inline one beats everything). What is
// computed is the element's declared values only; inheritance (colour, font size,
// visibility) is the tree walk's (visible-html.ts), as in a browser.
import type { Document, Element } from 'domhandler';
import { findAll } from 'domutils';
import { BoundedSelector } from './bounded-select.js';
import { inlineDeclarations, type Declaration, type Relevant, type StyleSheets } from './style-sheets.js';

/** Time for matching the sheets' selectors against one mail (the whole parse has PARSE_MS: mail.ts). */
export const MATCH_MS = 2_000;

/** Declared value per property (lower case), for the elements that have any. */
export type Styles = Map<Element, Map<string, string>>;

export interface Cascaded {
  styles: Styles;
  /** What was not evaluated, as phrases for the agent's note. */
  gaps: string[];
}

/** Where a declaration stands: compared tier first, then specificity, then order. */
interface Standing {
  value: string;
  /** 0 sheet, 1 inline, 2 sheet !important, 3 inline !important. */
  tier: number;
  specificity: number;
  order: number;
}

const beats = (a: Omit<Standing, 'value'>, b: Standing): boolean =>
  a.tier !== b.tier ? a.tier > b.tier : a.specificity !== b.specificity ? a.specificity > b.specificity : a.order >= b.order;

/** Applications between two looks at the clock. */
const APPLIES_PER_CHECK = 1024;

class Winners {
  private readonly byElement = new Map<Element, Map<string, Standing>>();

  apply(el: Element, d: Declaration, inline: boolean, specificity: number, order: number): void {
    let mine = this.byElement.get(el);
    if (mine === undefined) this.byElement.set(el, (mine = new Map()));
    const standing = { tier: (d.important ? 2 : 0) + (inline ? 1 : 0), specificity, order };
    const held = mine.get(d.property);
    if (held === undefined || beats(standing, held)) mine.set(d.property, { ...standing, value: d.value });
  }

  styles(): Styles {
    const out: Styles = new Map();
    for (const [el, props] of this.byElement) out.set(el, new Map([...props].map(([p, s]) => [p, s.value])));
    return out;
  }
}

/** The mail's elements' declared styles, within `deadline` (a performance.now() time) for the sheets. */
export function cascade(dom: Document, sheets: StyleSheets, relevant: Relevant, deadline: number): Cascaded {
  const winners = new Winners();
  const gaps = [...sheets.gaps];
  const selector = new BoundedSelector(deadline);
  const validLists = new Map<string, boolean>();
  let applied = 0;
  for (let i = 0; i < sheets.rules.length; i++) {
    const rule = sheets.rules[i];
    // One selector css-select cannot read drops its whole rule, as one a browser cannot read does.
    let valid = validLists.get(rule.list);
    if (valid === undefined) validLists.set(rule.list, (valid = selector.valid(rule.list)));
    if (!valid) continue;
    const matched = selector.select(rule.selector, dom);
    if (!matched.ok && matched.reason === 'invalid') continue;
    if (!matched.ok || selector.expired) {
      gaps.push(`matching its style sheets took longer than ${MATCH_MS / 1000} s, and ${(sheets.rules.length - i).toLocaleString('en-US')} of its ${sheets.rules.length.toLocaleString('en-US')} selectors were not evaluated`);
      break;
    }
    for (const el of matched.elements) {
      for (const d of rule.declarations) winners.apply(el, d, false, rule.specificity, rule.order);
      if (++applied % APPLIES_PER_CHECK === 0) selector.check();
    }
  }
  // Inline styles always count: they are the element's own, and cheap.
  for (const el of findAll((e) => e.attribs.style !== undefined, dom.children)) {
    for (const d of inlineDeclarations(el.attribs.style, relevant)) winners.apply(el, d, true, 0, Number.MAX_SAFE_INTEGER);
  }
  return { styles: winners.styles(), gaps };
}
