// Is a mail's From its sender's? Only what a stranger cannot write counts: a DKIM signature
// of the From's domain (aligned as DMARC says: that domain's policy, or its organisational
// domain when it has none), made over the From header and the whole body, verified here by
// mailauth against the raw message fetched over IMAP. The plugin cannot check SPF (it never
// sees the connecting IP), so a mail without such a signature is not authenticated, however
// its headers read. A lookup that did not happen is "temporary": the mail is tried again
// later, and never admitted on it.
//
// The resolver a mail is checked with answers only names that could speak for its From
// domain (the signature keys and DMARC records of a domain sharing its last two labels;
// mailauth then checks alignment properly) and at most MAX_LOOKUPS of them: a stranger's
// hundred signatures of domains of their own cost no lookups at all.
import { dkimVerify, dmarc } from 'mailauth';
import { DnsError, type Resolver } from './dns-over-https.js';

export type SenderVerdict =
  | { kind: 'authenticated'; /** The signing domains relied on. */ domains: string[]; reason: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'temporary'; reason: string };

/** The fields of mailauth's DKIM result read here (its type declarations lack some). */
interface Signature {
  signingDomain?: string;
  algo?: string;
  signingHeaders?: { keys?: string };
  status: { result: string; comment?: string; aligned?: string | boolean; underSized?: number | boolean };
}

/** Lookups one mail may cause. */
const MAX_LOOKUPS = 8;
/** One mail's check, lookups included. */
export const VERIFY_MS = 20_000;

const lastTwo = (domain: string): string => domain.split('.').slice(-2).join('.');

/** `resolver`, answering only names that may speak for `fromDomain`, and at most MAX_LOOKUPS. */
function scoped(resolver: Resolver, fromDomain: string): Resolver {
  const org = lastTwo(fromDomain);
  let lookups = 0;
  return async (name, rrtype) => {
    const n = name.toLowerCase();
    const key = /\._domainkey\.(.+)$/.exec(n)?.[1];
    const policy = /^_dmarc\.(.+)$/.exec(n)?.[1];
    const about = key ?? policy;
    // "No such name" for the others: mailauth reads it as no key (neutral), never as a pass.
    if (about === undefined || lastTwo(about) !== org) throw new DnsError('ENOTFOUND', 'not a name that can speak for the From domain');
    if (++lookups > MAX_LOOKUPS) throw new DnsError('ENOTFOUND', `more than ${MAX_LOOKUPS} lookups for one mail`);
    return resolver(name, rrtype);
  };
}

/** A signature that vouches for the From domain, or why this one does not. */
function vouches(sig: Signature): true | string {
  if (sig.status.result !== 'pass') return `dkim=${sig.status.result}${sig.status.comment ? ` (${sig.status.comment})` : ''}`;
  // RFC 8301: SHA-1 signatures are not to be trusted.
  if ((sig.algo ?? '').toLowerCase().endsWith('-sha1')) return 'a SHA-1 signature';
  // RFC 6376 §5.4: From must be signed; otherwise anyone may replace it.
  const signed = (sig.signingHeaders?.keys ?? '').split(':').map((k) => k.trim().toLowerCase());
  if (!signed.includes('from')) return 'a signature that does not cover From';
  // l=: a body longer than the part signed has text anyone could have added.
  if (sig.status.underSized) return 'a signature over only part of the body';
  if (!sig.status.aligned) return `a signature of ${sig.signingDomain ?? '?'}, not the From domain`;
  return true;
}

async function check(source: Buffer, from: string, resolver: Resolver): Promise<SenderVerdict> {
  const fromDomain = from.slice(from.lastIndexOf('@') + 1).toLowerCase();
  const lookup = scoped(resolver, fromDomain);
  let dkim;
  try {
    dkim = await dkimVerify(source, { resolver: lookup, minBitLength: 1024 });
  } catch {
    return { kind: 'refused', reason: 'the DKIM verifier could not read the mail' };
  }
  const fromLines = (dkim.headers?.parsed ?? []).filter((h) => h.key === 'from').length;
  if (fromLines !== 1) return { kind: 'refused', reason: `${fromLines} From headers, not one` };
  // The address the policy listed must be the one the signatures and DMARC speak for:
  // two parsers reading one header differently is a way in.
  if (dkim.headerFrom.length !== 1 || dkim.headerFrom[0].toLowerCase() !== from) return { kind: 'refused', reason: 'the From header reads differently to the DKIM verifier' };
  const signatures = dkim.results as unknown as Signature[];
  const good = signatures.filter((s) => vouches(s) === true);
  if (good.length === 0) {
    if (signatures.some((s) => s.status.result === 'temperror')) return { kind: 'temporary', reason: 'a DKIM key could not be looked up' };
    const why = signatures.map((s) => vouches(s)).filter((w): w is string => w !== true);
    return { kind: 'refused', reason: `no valid DKIM signature of the From domain (${[...new Set(why)].slice(0, 3).join('; ') || 'none'})` };
  }
  const policy = await dmarc({
    headerFrom: from,
    spfDomains: [],
    dkimDomains: good.map((s) => ({ domain: s.signingDomain ?? '', aligned: true })),
    resolver: lookup,
  });
  const domains = [...new Set(good.map((s) => (s.signingDomain ?? '').toLowerCase()))];
  const result = policy ? policy.status.result : 'none';
  if (result === 'pass') return { kind: 'authenticated', domains, reason: `DKIM of ${domains.join(', ')}, DMARC pass` };
  // No DMARC record: DKIM aligned with the organisational domain (mailauth's relaxed alignment).
  if (result === 'none') return { kind: 'authenticated', domains, reason: `DKIM of ${domains.join(', ')} (the From domain publishes no DMARC policy)` };
  if (result === 'temperror') return { kind: 'temporary', reason: 'the DMARC policy could not be looked up' };
  return { kind: 'refused', reason: `DMARC ${result}` };
}

/** The verdict on `source` (the raw mail) for its one From address `from` (lower case), within VERIFY_MS. */
export async function verifySenderOf(source: Buffer, from: string, resolver: Resolver, timeoutMs = VERIFY_MS): Promise<SenderVerdict> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<SenderVerdict>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'temporary', reason: `not checked within ${timeoutMs} ms` }), timeoutMs);
  });
  try {
    return await Promise.race([check(source, from, resolver).catch((): SenderVerdict => ({ kind: 'refused', reason: 'the check failed' })), late]);
  } finally {
    clearTimeout(timer);
  }
}
