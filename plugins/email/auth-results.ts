// Is a mail's From authenticated? Only the receiving server's word counts: the topmost
// Authentication-Results header (RFC 8601) whose authserv-id is the configured one. Servers
// add theirs on top; anything lower, or under another id, may have come from the sender.
// A pass counts when it speaks for the From domain: DMARC (which checked alignment), or
// SPF or DKIM for exactly that domain (strict alignment: no public-suffix guessing).
//
// Some servers number the id by the machine that took the mail (`mx*.messagingengine.com`:
// one `*` stands for one label's letters, digits and hyphens) and split the verdict over
// a run of headers in a row (Fastmail: DKIM, DMARC and SPF in the fourth). With `split`,
// the run under that one id is read whole; a method said in two of its headers (a sender's
// header added just below the server's) makes the mail count as not authenticated.

export interface AuthVerdict {
  authenticated: boolean;
  /** Why, in a few words, for the log (never the mail's content). */
  reason: string;
}

interface MethodResult {
  method: string;
  result: string;
  props: Map<string, string>;
}

/** A header line without its name, unfolded. */
function headerValue(line: string): string {
  return line.replace(/\r?\n[ \t]+/g, ' ').replace(/^[^:]*:/, '').trim();
}

/** Comments (parenthesized, possibly nested) removed; quoted strings kept. */
function withoutComments(text: string): string {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      out += c;
      if (c === '\\' && i + 1 < text.length) out += text[++i];
      else if (c === '"') quoted = false;
    } else if (depth > 0) {
      if (c === '\\') i++;
      else if (c === '(') depth++;
      else if (c === ')') depth--;
    } else if (c === '(') depth++;
    else {
      if (c === '"') quoted = true;
      out += c;
    }
  }
  return out;
}

/** Split on `sep` outside quoted strings. */
function splitOutside(text: string, sep: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    if (c === sep && !quoted) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

const unquote = (v: string): string => (v.startsWith('"') && v.endsWith('"') && v.length >= 2 ? v.slice(1, -1).replace(/\\(.)/g, '$1') : v);

export function parseAuthResults(value: string): { authservId: string; results: MethodResult[] } {
  const [head, ...rest] = splitOutside(withoutComments(value), ';');
  const authservId = unquote((head ?? '').trim().split(/\s+/)[0] ?? '').toLowerCase();
  const results: MethodResult[] = [];
  for (const part of rest) {
    const tokens = part.trim().split(/\s+/).filter(Boolean);
    const first = /^([A-Za-z0-9_-]+)(?:\/[0-9]+)?\s*=\s*([A-Za-z0-9_-]+)$/.exec(tokens[0] ?? '');
    if (!first) continue;
    const props = new Map<string, string>();
    for (const token of tokens.slice(1)) {
      const eq = token.indexOf('=');
      if (eq > 0) props.set(token.slice(0, eq).toLowerCase(), unquote(token.slice(eq + 1)).toLowerCase());
    }
    results.push({ method: first[1].toLowerCase(), result: first[2].toLowerCase(), props });
  }
  return { authservId, results };
}

const domainOf = (value: string): string => value.slice(value.lastIndexOf('@') + 1).toLowerCase();

/** Where the receiving server's verdict is (settings `authserv_id`, `authserv_split`). */
export interface Verifier {
  /** The authserv-id, lower case; one `*` may stand for one label's [a-z0-9-]+. */
  authservId: string;
  /** The server writes its verdict over several headers in a row. */
  split: boolean;
}

const idMatcher = (pattern: string): RegExp => new RegExp(`^${pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[a-z0-9-]+')}$`);

/**
 * `headerLines`: the mail's raw header lines, topmost first (mailparser's headerLines).
 * `fromAddress`: the one From address.
 */
export function verifySender(headerLines: ReadonlyArray<{ key: string; line: string }>, verifier: Verifier, fromAddress: string): AuthVerdict {
  const fromDomain = domainOf(fromAddress);
  const wanted = idMatcher(verifier.authservId.toLowerCase());
  const isResults = (h: { key: string }): boolean => h.key.toLowerCase() === 'authentication-results';
  const top = headerLines.findIndex((h) => isResults(h) && wanted.test(parseAuthResults(headerValue(h.line)).authservId));
  if (top < 0) return { authenticated: false, reason: `no Authentication-Results from ${verifier.authservId}` };
  const first = parseAuthResults(headerValue(headerLines[top].line));
  const run = [first];
  for (let i = top + 1; verifier.split && i < headerLines.length && isResults(headerLines[i]); i++) {
    const next = parseAuthResults(headerValue(headerLines[i].line));
    if (next.authservId !== first.authservId) break;
    run.push(next);
  }
  const said = run.flatMap((header) => [...new Set(header.results.map((r) => r.method))]);
  if (new Set(said).size !== said.length) return { authenticated: false, reason: `a method's result appears in two headers from ${first.authservId}` };
  const results = run.flatMap((header) => header.results);
  if (results.some((r) => r.method === 'dmarc' && r.result !== 'pass' && r.result !== 'none')) return { authenticated: false, reason: 'DMARC did not pass' };
  for (const r of results) {
    if (r.result !== 'pass') continue;
    if (r.method === 'dmarc') {
      const from = r.props.get('header.from');
      if (from === undefined || from === fromDomain) return { authenticated: true, reason: 'DMARC pass' };
    }
    if (r.method === 'dkim') {
      const d = r.props.get('header.d') ?? (r.props.has('header.i') ? domainOf(r.props.get('header.i')!) : undefined);
      if (d === fromDomain) return { authenticated: true, reason: 'DKIM pass for the From domain' };
    }
    if (r.method === 'spf') {
      const mailfrom = r.props.get('smtp.mailfrom');
      if (mailfrom !== undefined && domainOf(mailfrom) === fromDomain) return { authenticated: true, reason: 'SPF pass for the From domain' };
    }
  }
  return { authenticated: false, reason: 'no pass for the From domain' };
}

/** Automated mail (RFC 3834 Auto-Submitted, Precedence bulk/list/junk, a mailing list's List-Id). */
export function isAutomated(headerLines: ReadonlyArray<{ key: string; line: string }>): boolean {
  for (const { key, line } of headerLines) {
    const name = key.toLowerCase();
    const value = headerValue(line).toLowerCase();
    if (name === 'auto-submitted' && value.split(';')[0].trim() !== 'no') return true;
    if (name === 'precedence' && ['bulk', 'list', 'junk'].includes(value.split(';')[0].trim())) return true;
    if (name === 'list-id') return true;
  }
  return false;
}
