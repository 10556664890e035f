// The rules of a mail's <style> sheets that can hide text, read with css-tree. A sender
// can hide words with a class rule as easily as with an inline style, so the sheets are
// read as a mail client on a screen would: every <style> element in document order, rules
// inside @media counted unless the query can only match print (or another non-screen
// medium), @supports/@layer/@container blocks counted as they stand. @import, <link> sheets
// and anything else outside the mail are never fetched: a reader's client does not either,
// and the plugin makes no request a sender chose. Only declarations the hiding check reads
// are kept (`relevant`), which keeps a long sheet of paddings and fonts cheap.
//
// Anyone can send the sheet, so the work is bounded: the first MAX_CSS_CHARS of CSS and the
// first MAX_SELECTORS selectors are read, and what was not is said (`gaps`), for the agent
// to be told that text hidden by the rest may show.
import { generate, parse, type Atrule, type CssNode, type Rule, type Selector } from 'css-tree';
import type { Document, Element } from 'domhandler';
import { findAll, textContent } from 'domutils';

/** CSS read from a mail's sheets; the rest is not evaluated (and said). */
export const MAX_CSS_CHARS = 65_536;
/** Selectors (of rules with a declaration that matters) evaluated; the rest are not. */
export const MAX_SELECTORS = 2_000;

export interface Declaration {
  property: string;
  /** Lower case, trimmed, without `!important`. */
  value: string;
  important: boolean;
}

export interface StyleRule {
  /** One complex selector, as css-select takes it. */
  selector: string;
  /** a·1e6 + b·1e3 + c (ids, classes/attributes/pseudo-classes, types), each capped at 999. */
  specificity: number;
  /** Position in the sheets: a later rule wins a tie. Selectors of one rule share it. */
  order: number;
  /** The selector list this one came from: one invalid selector drops the whole rule, as in a browser. */
  list: string;
  declarations: Declaration[];
}

export interface StyleSheets {
  rules: StyleRule[];
  /** What was not evaluated, as phrases for the agent's note; empty when all was. */
  gaps: string[];
}

/** Media types a screen reader's (a person's) client never is. */
const NOT_SCREEN = new Set(['print', 'speech', 'tty', 'braille', 'embossed', 'handheld', 'projection', 'tv', 'aural']);
/** At-rules whose rules apply to the page as it shows (so count). */
const GROUPING = new Set(['media', 'supports', 'layer', 'container', 'document', '-moz-document', 'scope', 'starting-style']);

/** Declarations whose value the hiding check reads; `relevant` keeps only these. */
export type Relevant = (property: string) => boolean;

const lower = (s: string): string => s.trim().toLowerCase();

/** Parsed declarations of a block or an inline style, in order. */
export function declarationsOf(block: CssNode, relevant: Relevant): Declaration[] {
  const out: Declaration[] = [];
  if (block.type !== 'Block' && block.type !== 'DeclarationList') return out;
  block.children.forEach((node) => {
    if (node.type !== 'Declaration') return;
    const property = lower(node.property);
    if (!relevant(property)) return;
    const value = lower(node.value.type === 'Raw' ? node.value.value : generate(node.value)).replace(/\s*!\s*important$/, '');
    out.push({ property, value, important: node.important !== false });
  });
  return out;
}

/** An element's `style` attribute's declarations (css-tree's reading of it: the sheet's). */
export function inlineDeclarations(style: string, relevant: Relevant): Declaration[] {
  try {
    return declarationsOf(parse(style, { context: 'declarationList', parseValue: false, parseCustomProperty: false }), relevant);
  } catch {
    return []; // css-tree recovers from nearly everything; a style it cannot read hides nothing
  }
}

/** Can a media query list match a screen? Unreadable lists count as matching (the rules then hide). */
export function matchesScreen(prelude: CssNode | null): boolean {
  if (prelude === null) return true;
  const list = prelude.type === 'AtrulePrelude' ? prelude.children.first : prelude;
  if (!list || list.type !== 'MediaQueryList') return true;
  let screen = false;
  list.children.forEach((q) => {
    if (q.type !== 'MediaQuery') {
      screen = true;
      return;
    }
    const type = (q.mediaType ?? 'all').toLowerCase();
    const negated = (q.modifier ?? '').toLowerCase() === 'not';
    if (!negated && !NOT_SCREEN.has(type)) screen = true;
    // "not print" matches a screen; "not screen" / "not all" alone never does.
    if (negated && (NOT_SCREEN.has(type) || q.condition !== null)) screen = true;
  });
  return screen;
}

/** Does a <style media="…"> apply on a screen? */
function styleElementApplies(el: Element): boolean {
  const media = el.attribs.media;
  if (media === undefined || media.trim() === '') return true;
  try {
    return matchesScreen(parse(media, { context: 'mediaQueryList' }));
  } catch {
    return true;
  }
}

const cap = (n: number): number => Math.min(n, 999);

/** Specificity of one complex selector (Selectors Level 4: :is/:not/:has take their most specific argument, :where none). */
export function specificityOf(selector: Selector): number {
  let a = 0;
  let b = 0;
  let c = 0;
  selector.children.forEach((node) => {
    switch (node.type) {
      case 'IdSelector':
        a++;
        break;
      case 'ClassSelector':
      case 'AttributeSelector':
        b++;
        break;
      case 'TypeSelector':
        if (node.name !== '*' && !node.name.endsWith('|*')) c++;
        break;
      case 'PseudoElementSelector':
        c++;
        break;
      case 'PseudoClassSelector': {
        const name = node.name.toLowerCase();
        if (name === 'where') break;
        if (['is', 'not', 'has', 'matches', '-webkit-any', '-moz-any'].includes(name)) {
          // Only the arguments themselves: each computes its own nested ones, once.
          let most = 0;
          node.children?.forEach((arg) => {
            if (arg.type === 'SelectorList') arg.children.forEach((inner) => {
              if (inner.type === 'Selector') most = Math.max(most, specificityOf(inner));
            });
            else if (arg.type === 'Selector') most = Math.max(most, specificityOf(arg));
          });
          a += Math.floor(most / 1e6);
          b += Math.floor(most / 1e3) % 1e3;
          c += most % 1e3;
          break;
        }
        b++;
        break;
      }
      default:
        break;
    }
  });
  return cap(a) * 1e6 + cap(b) * 1e3 + cap(c);
}

/** The CSS of the mail's sheets in document order, cut to MAX_CSS_CHARS at a rule's end. */
function sheetText(dom: Document): { css: string; total: number } {
  const parts: string[] = [];
  let total = 0;
  let kept = 0;
  for (const el of findAll((e) => e.name.toLowerCase() === 'style', dom.children)) {
    if (!styleElementApplies(el)) continue;
    const text = textContent(el);
    total += text.length;
    if (kept >= MAX_CSS_CHARS) continue;
    let part = text.slice(0, MAX_CSS_CHARS - kept);
    // A rule cut in two could read as another ("font-size:0.9em" as "font-size:0"): end at a '}'.
    if (part.length < text.length) part = part.slice(0, part.lastIndexOf('}') + 1);
    parts.push(part);
    kept += part.length;
  }
  return { css: parts.join('\n'), total };
}

/** The rules of the mail's <style> sheets that set something `relevant`, bounded. */
export function styleSheets(dom: Document, relevant: Relevant): StyleSheets {
  const { css, total } = sheetText(dom);
  const gaps: string[] = [];
  if (total > MAX_CSS_CHARS) gaps.push(`its style sheets hold ${total.toLocaleString('en-US')} characters of CSS, of which only the first ${MAX_CSS_CHARS.toLocaleString('en-US')} were evaluated`);
  if (css.trim() === '') return { rules: [], gaps };
  let sheet: CssNode;
  try {
    // Values are kept raw: the hiding check reads them itself, and parsing each is work for nothing.
    sheet = parse(css, { parseValue: false, parseCustomProperty: false });
  } catch {
    return { rules: [], gaps: [...gaps, 'its style sheets could not be read'] };
  }
  const rules: StyleRule[] = [];
  let order = 0;
  let over = false;
  const visit = (node: CssNode): void => {
    if (over) return;
    if (node.type === 'Rule') return addRule(node);
    if (node.type !== 'Atrule') return;
    const at: Atrule = node;
    const name = at.name.toLowerCase();
    if (!GROUPING.has(name) || at.block === null) return; // @import, @font-face, @page, @keyframes…: nothing shown
    if (name === 'media' && !matchesScreen(at.prelude)) return;
    at.block.children.forEach(visit);
  };
  const addRule = (rule: Rule): void => {
    order++;
    if (rule.prelude.type !== 'SelectorList') return; // css-tree could not read the selector: a browser drops it too
    const declarations = declarationsOf(rule.block, relevant);
    if (declarations.length === 0) return;
    const list = generate(rule.prelude);
    rule.prelude.children.forEach((sel) => {
      if (over || sel.type !== 'Selector') return;
      if (rules.length >= MAX_SELECTORS) {
        over = true;
        return;
      }
      rules.push({ selector: generate(sel), specificity: specificityOf(sel), order, list, declarations });
    });
  };
  if (sheet.type === 'StyleSheet') sheet.children.forEach(visit);
  if (over) gaps.push(`its style sheets hold more than ${MAX_SELECTORS.toLocaleString('en-US')} selectors that could hide text, of which only the first ${MAX_SELECTORS.toLocaleString('en-US')} were evaluated`);
  return { rules, gaps };
}
