// Turns the agent's free text into an FTS5 MATCH expression. The text is never passed to
// FTS5 as syntax: it is cut into words, and every word becomes a quoted string literal
// (a phrase of one token), so quotes, AND/OR/NOT, NEAR(, *, -, ^, column filters and
// parentheses are all just text. The words are OR-ed; bm25 ranks entries matching more of
// them, and rarer ones, first.

/** More words than this add cost, not precision. */
export const MAX_QUERY_TERMS = 32;

/** Word characters as FTS5's unicode61 tokenizer sees them (letters, numbers, private use). */
const WORD = /[\p{L}\p{N}\p{Mn}\p{Co}]+/gu;

/** The words of a text in order, lower-cased (at most MAX_QUERY_TERMS). */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const match of text.normalize('NFKC').matchAll(WORD)) {
    out.push(match[0].toLowerCase());
    if (out.length >= MAX_QUERY_TERMS) break;
  }
  return out;
}

/** The distinct words of a query; empty when it has none. */
export function queryTerms(text: string): string[] {
  return [...new Set(words(text))];
}

/** A string literal for FTS5: wrapped in double quotes, inner quotes doubled. */
export function quoteLiteral(term: string): string {
  return `"${term.replace(/"/g, '""')}"`;
}

/** Any of the terms: `"a" OR "b"`, parenthesised; null for none. */
export function anyOf(terms: readonly string[]): string | null {
  return terms.length === 0 ? null : `(${terms.map(quoteLiteral).join(' OR ')})`;
}

/** The MATCH expression for a query, or null when it holds no searchable word. */
export function ftsMatchExpression(text: string): string | null {
  return anyOf(queryTerms(text));
}

/**
 * A pre-filter for one tag: its words as a phrase in the tags column (`tags : ("new" +
 * "york")`). Approximate (stemmed, and "new york city" contains the phrase too), so the
 * caller still checks the tag exactly; null for a tag without words.
 */
export function tagPhrase(tag: string): string | null {
  const w = words(tag);
  return w.length === 0 ? null : `tags : (${w.map(quoteLiteral).join(' + ')})`;
}
