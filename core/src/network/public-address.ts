// "Public internet" for a skill that declares it (skill.json network.public): a host is
// reached only when every address its name resolves to is public unicast (ipaddr.js's
// ranges: not loopback, private, link-local (169.254.169.254 included), carrier-grade NAT,
// unique-local, multicast, reserved, IPv4-mapped or a NAT64 prefix). The relay resolves the
// name itself, once, and connects to the address it checked: a name that resolves to a
// public address now and a private one a moment later (DNS rebinding) gains nothing.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Addresses a name resolves to. Injectable only in code (the docker tests' stand-in names), never by a setting. */
export type Resolver = (host: string) => Promise<string[]>;

export const systemResolver: Resolver = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Whether `address` (an IP address) is public unicast. */
export function isPublicUnicast(address: string): boolean {
  if (!ipaddr.isValid(address) || isIP(address) === 0) return false;
  return ipaddr.parse(address).range() === 'unicast';
}

export type PublicAddress = { address: string } | { code: 'DNS_FAILED' | 'ADDRESS_NOT_PUBLIC'; words: string };

const RESOLVE_MS = 5000;
const MAX_ADDRESSES = 32;

/** The addresses of `host` (a name, or an address as it is: no lookup), or why there are none. */
export async function resolveHost(host: string, resolve: Resolver): Promise<{ addresses: string[] } | { code: 'DNS_FAILED'; words: string }> {
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) !== 0) return { addresses: [bare] };
  let timer: NodeJS.Timeout | undefined;
  try {
    const addresses = await Promise.race([resolve(bare), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEOUT' })), RESOLVE_MS)))]);
    return addresses.length > 0 ? { addresses } : { code: 'DNS_FAILED', words: `the name ${bare} has no address` };
  } catch (err) {
    return { code: 'DNS_FAILED', words: `the name ${bare} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  } finally {
    clearTimeout(timer);
  }
}

/** The address to connect to for `host` (a name or an address), or why not: every address it has must be public. */
export async function publicAddress(host: string, resolve: Resolver): Promise<PublicAddress> {
  const resolved = await resolveHost(host, resolve);
  if ('code' in resolved) return resolved;
  const { addresses } = resolved;
  const bad = addresses.slice(0, MAX_ADDRESSES).find((a) => !isPublicUnicast(a));
  if (bad !== undefined || addresses.length > MAX_ADDRESSES) {
    const range = bad !== undefined && ipaddr.isValid(bad) ? ipaddr.parse(bad).range() : 'too many addresses';
    return { code: 'ADDRESS_NOT_PUBLIC', words: `${host.replace(/^\[|\]$/g, '')} resolves to ${bad ?? addresses.length} (${range}): only public unicast addresses are reached` };
  }
  return { address: addresses[0] };
}
