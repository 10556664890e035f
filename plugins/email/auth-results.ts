// The receiving server's word on a mail's sender (RFC 8601 Authentication-Results), as a
// second opinion only: it may refuse a mail the plugin's own check (sender-auth.ts) passed,
// never admit one. Anyone can write such a header, so only the topmost one whose
// authserv-id is the configured one is read (servers add theirs on top); a header this
// reading gets wrong can at worst keep a listed sender's mail out, never let a stranger in.
//
// Some servers number the id by the machine that took the mail (`mx*.messagingengine.com`:
// one `*` stands for one label's letters, digits and hyphens) and split the verdict over
// a run of headers in a row (Fastmail: DKIM, DMARC and SPF in the fourth). With `split`,
// the run under that one id is read whole.

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
    // A quoted-pair (\") inside a quoted string neither ends it nor is a separator.
    if (quoted && c === '\\' && i + 1 < text.length) {
      current += c + text[++i];
      continue;
    }
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

/** The run of headers the configured server wrote (topmost first), or null when it wrote none. */
function serverRun(headerLines: ReadonlyArray<{ key: string; line: string }>, verifier: Verifier): MethodResult[] | null {
  const wanted = idMatcher(verifier.authservId.toLowerCase());
  const isResults = (h: { key: string }): boolean => h.key.toLowerCase() === 'authentication-results';
  const top = headerLines.findIndex((h) => isResults(h) && wanted.test(parseAuthResults(headerValue(h.line)).authservId));
  if (top < 0) return null;
  const first = parseAuthResults(headerValue(headerLines[top].line));
  const results = [...first.results];
  for (let i = top + 1; verifier.split && i < headerLines.length && isResults(headerLines[i]); i++) {
    const next = parseAuthResults(headerValue(headerLines[i].line));
    if (next.authservId !== first.authservId) break;
    results.push(...next.results);
  }
  return results;
}

/**
 * Why the configured server's verdict refuses a mail the plugin authenticated, or null when
 * it does not: it wrote no verdict on the mail (the mail did not come in through it), it
 * says DMARC failed for the From domain, or DKIM failed (and never passed) for a domain the
 * plugin relied on. `headerLines`: the mail's raw header lines, topmost first (mailparser's
 * headerLines); `domains`: the signing domains the plugin's check relied on.
 */
export function serverObjection(headerLines: ReadonlyArray<{ key: string; line: string }>, verifier: Verifier, fromAddress: string, domains: readonly string[]): string | null {
  const results = serverRun(headerLines, verifier);
  if (results === null) return `no Authentication-Results from ${verifier.authservId}`;
  const fromDomain = domainOf(fromAddress);
  const signer = (r: MethodResult): string | undefined => r.props.get('header.d') ?? (r.props.has('header.i') ? domainOf(r.props.get('header.i')!) : undefined);
  for (const r of results) {
    if (r.method === 'dmarc' && (r.result === 'fail' || r.result === 'permerror')) {
      const about = r.props.get('header.from');
      if (about === undefined || about === fromDomain) return `${verifier.authservId} says dmarc=${r.result}`;
    }
  }
  for (const domain of domains) {
    const said = results.filter((r) => r.method === 'dkim' && signer(r) === domain);
    if (said.some((r) => r.result === 'fail') && !said.some((r) => r.result === 'pass')) return `${verifier.authservId} says dkim=fail for ${domain}`;
  }
  return null;
}
