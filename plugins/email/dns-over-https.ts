// TXT lookups for DKIM keys and DMARC policies over DNS-over-HTTPS (the JSON API,
// `application/dns-json`, that Cloudflare and Google serve). The plugin's process has no
// network but its manifest's hosts, reached through the egress relay with fetch: a resolver
// URL is one of them (settings `dns_resolver_url`), port 53 never is.
//
// Answers are shaped as node:dns's resolve() gives them, which is what mailauth takes as its
// `resolver`: TXT records as arrays of their character-strings; "no such name" and "no such
// record" as errors coded ENOTFOUND and ENODATA (mailauth reads those as "none"). Any other
// failure (timeout, an HTTP error, SERVFAIL, an answer too large or not of its shape) is
// coded so that mailauth calls it a temporary error: a mail is never admitted on a lookup
// that did not happen. Every lookup is bounded in time and size; answers are cached by
// their TTL (clamped), in a cache of bounded size.

/** What mailauth calls: node:dns's `resolve(name, rrtype)`. */
export type Resolver = (name: string, rrtype: string) => Promise<string[][]>;

export interface DohOptions {
  /** The resolver's URL, e.g. https://cloudflare-dns.com/dns-query. */
  url: string;
  timeoutMs?: number;
  /** The most bytes an answer may have. */
  maxBytes?: number;
  /** The most names cached (oldest dropped first). */
  cacheEntries?: number;
  /** Now, in ms (tests). */
  now?: () => number;
}

/** The error mailauth sees; `code` is what it reads. */
export class DnsError extends Error {
  constructor(
    readonly code: 'ENOTFOUND' | 'ENODATA' | 'ETIMEOUT' | 'ESERVFAIL' | 'EBADRESP' | 'ENOTIMP' | 'EREFUSED',
    message: string,
  ) {
    super(message);
    this.name = 'DnsError';
  }
}

const TXT = 16;
/** DNS RCODEs in the JSON answer's Status. */
const NOERROR = 0;
const NXDOMAIN = 3;
/** Cached at least this long (a TTL of 0 would cost a lookup per signature) and at most this long. */
const MIN_TTL_S = 30;
const MAX_TTL_S = 3600;
/** "No such name" without an SOA to say for how long: kept this long. */
const NEGATIVE_TTL_S = 300;

interface DnsJson {
  Status?: unknown;
  Answer?: unknown;
  Authority?: unknown;
}

interface RecordJson {
  type?: unknown;
  TTL?: unknown;
  data?: unknown;
}

type Cached = { until: number; records: string[][] } | { until: number; error: 'ENOTFOUND' | 'ENODATA' };

/**
 * A TXT record's data as the JSON API writes it, split into its character-strings: in
 * presentation format (`"v=DKIM1; k=rsa; " "p=MIIB..."`, with \" and \DDD escapes; Cloudflare)
 * or, unquoted, as one string (Google).
 */
export function txtStrings(data: string): string[] {
  const text = data.trim();
  if (!text.startsWith('"')) return [text];
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    while (text[i] === ' ') i++;
    if (i >= text.length) break;
    if (text[i] !== '"') throw new DnsError('EBADRESP', 'a TXT record that is not a sequence of quoted strings');
    let s = '';
    for (i++; i < text.length && text[i] !== '"'; i++) {
      if (text[i] !== '\\') {
        s += text[i];
        continue;
      }
      const digits = /^\d{3}/.exec(text.slice(i + 1, i + 4));
      if (digits) {
        s += String.fromCharCode(Number(digits[0]));
        i += 3;
      } else s += text[++i] ?? '';
    }
    if (text[i] !== '"') throw new DnsError('EBADRESP', 'an unterminated string in a TXT record');
    i++;
    out.push(s);
  }
  return out;
}

/** The body of `response`, refused past `max` bytes (without reading further). */
async function boundedText(response: Response, max: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > max) throw new DnsError('EBADRESP', `an answer of ${declared} bytes (at most ${max})`);
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw new DnsError('EBADRESP', `an answer of more than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const clampTtl = (ttl: unknown, fallback: number): number => {
  const n = typeof ttl === 'number' && Number.isFinite(ttl) ? ttl : fallback;
  return Math.min(MAX_TTL_S, Math.max(MIN_TTL_S, n));
};

/** A resolver for mailauth that asks `options.url`. */
export function dohResolver(options: DohOptions): Resolver {
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxBytes = options.maxBytes ?? 64 * 1024;
  const cap = options.cacheEntries ?? 2000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, Cached>();
  /** One question in flight per name: the signatures of a burst of mails share it. */
  const inFlight = new Map<string, Promise<Cached>>();

  const remember = (name: string, entry: Cached): Cached => {
    cache.delete(name);
    cache.set(name, entry);
    while (cache.size > cap) cache.delete(cache.keys().next().value as string);
    return entry;
  };

  async function ask(name: string): Promise<Cached> {
    const url = new URL(options.url);
    url.searchParams.set('name', name);
    url.searchParams.set('type', 'TXT');
    let response: Response;
    try {
      response = await fetch(url, { headers: { accept: 'application/dns-json' }, signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
    } catch (err) {
      const e = err as Error;
      if (e?.name === 'TimeoutError' || e?.name === 'AbortError') throw new DnsError('ETIMEOUT', `no answer from the DNS resolver within ${timeoutMs} ms`);
      throw new DnsError('ESERVFAIL', `the DNS resolver could not be reached: ${String((e?.cause as Error)?.message ?? e?.message ?? e).slice(0, 200)}`);
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new DnsError('ESERVFAIL', `the DNS resolver answered HTTP ${response.status}`);
    }
    let json: DnsJson;
    try {
      json = JSON.parse(await boundedText(response, maxBytes)) as DnsJson;
    } catch (err) {
      if (err instanceof DnsError) throw err;
      if ((err as Error)?.name === 'TimeoutError' || (err as Error)?.name === 'AbortError') throw new DnsError('ETIMEOUT', `no whole answer from the DNS resolver within ${timeoutMs} ms`);
      throw new DnsError('EBADRESP', 'the DNS resolver\'s answer is not JSON');
    }
    if (json === null || typeof json !== 'object') throw new DnsError('EBADRESP', 'the DNS resolver\'s answer is not an object');
    const soaTtl = Array.isArray(json.Authority) ? (json.Authority as RecordJson[]).find((r) => r?.type === 6)?.TTL : undefined;
    if (json.Status === NXDOMAIN) return { until: now() + clampTtl(soaTtl, NEGATIVE_TTL_S) * 1000, error: 'ENOTFOUND' };
    if (json.Status !== NOERROR) throw new DnsError('ESERVFAIL', `the DNS resolver answered status ${String(json.Status)}`);
    const answers = (Array.isArray(json.Answer) ? (json.Answer as RecordJson[]) : []).filter((r) => r?.type === TXT);
    if (answers.length === 0) return { until: now() + clampTtl(soaTtl, NEGATIVE_TTL_S) * 1000, error: 'ENODATA' };
    const records = answers.map((r) => {
      if (typeof r.data !== 'string') throw new DnsError('EBADRESP', 'a TXT record without data');
      return txtStrings(r.data);
    });
    const ttl = Math.min(...answers.map((r) => clampTtl(r.TTL, MIN_TTL_S)));
    return { until: now() + ttl * 1000, records };
  }

  return async (rawName: string, rrtype: string): Promise<string[][]> => {
    if (rrtype !== 'TXT') throw new DnsError('ENOTIMP', `only TXT records are looked up (not ${rrtype})`);
    const name = rawName.toLowerCase().replace(/\.$/, '');
    if (name.length === 0 || name.length > 253 || name.split('.').some((label) => label.length === 0 || label.length > 63)) {
      throw new DnsError('ENOTFOUND', 'not a domain name');
    }
    let entry = cache.get(name);
    if (!entry || entry.until <= now()) {
      let pending = inFlight.get(name);
      if (!pending) {
        pending = ask(name).then((answer) => remember(name, answer));
        inFlight.set(name, pending);
        void pending.catch(() => undefined).finally(() => inFlight.delete(name));
      }
      entry = await pending;
    }
    if ('error' in entry) throw new DnsError(entry.error, entry.error === 'ENOTFOUND' ? `${name}: no such name` : `${name}: no TXT record`);
    return entry.records.map((strings) => [...strings]);
  };
}
