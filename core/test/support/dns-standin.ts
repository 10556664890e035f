// DNS for the mail tests: a DNS-over-HTTPS stand-in (the JSON API, `application/dns-json`,
// as Cloudflare's answers it: TXT data as quoted 255-byte strings) on 127.0.0.1, holding the
// TXT records a test publishes. Everything else is NXDOMAIN. A test that plays the owner of a
// domain publishes its DKIM key and DMARC policy here and signs its mail with the key
// (`DkimKey.sign`, mailauth's signer): the plugin's own check then runs as it would against
// real DNS.
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dkimSign } from 'mailauth';

export class DnsStandIn {
  private readonly records = new Map<string, string[]>();
  /** Names that answer SERVFAIL (a resolver that cannot reach the domain's servers). */
  readonly failing = new Set<string>();
  /** Names answered only after this many ms (a slow resolver), by name. */
  readonly slow = new Map<string, number>();
  /** Every name asked, in order. */
  readonly asked: string[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<DnsStandIn> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dns = new DnsStandIn(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/dns-query`);
    server.on('request', (req, res) => {
      const url = new URL(req.url ?? '/', 'http://dns');
      const name = (url.searchParams.get('name') ?? '').toLowerCase().replace(/\.$/, '');
      dns.asked.push(name);
      const reply = (body: unknown): void => {
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/dns-json' });
          res.end(JSON.stringify(body));
        }, dns.slow.get(name) ?? 0);
      };
      if (url.pathname !== '/dns-query' || url.searchParams.get('type') !== 'TXT') return reply({ Status: 4 });
      if (dns.failing.has(name)) return reply({ Status: 2, Question: [{ name, type: 16 }] });
      const txt = dns.records.get(name);
      if (!txt) return reply({ Status: 3, Question: [{ name, type: 16 }], Authority: [{ name: name.split('.').slice(-2).join('.'), type: 6, TTL: 60, data: 'ns. hostmaster. 1 2 3 4 60' }] });
      const quoted = (s: string): string => (s.match(/.{1,255}/g) ?? ['']).map((part) => `"${part.replace(/["\\]/g, '\\$&')}"`).join(' ');
      reply({ Status: 0, Question: [{ name, type: 16 }], Answer: txt.map((data) => ({ name, type: 16, TTL: 60, data: quoted(data) })) });
    });
    return dns;
  }

  publish(name: string, ...txt: string[]): void {
    this.records.set(name.toLowerCase(), txt);
  }

  /** A new DKIM key of `domain` under `selector`, its public half published here; and, unless `dmarc` is null, a DMARC policy. */
  dkimKey(domain: string, selector = 's1', dmarc: string | null = 'v=DMARC1; p=reject'): DkimKey {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.publish(`${selector}._domainkey.${domain}`, `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`);
    if (dmarc !== null) this.publish(`_dmarc.${domain}`, dmarc);
    return new DkimKey(domain, selector, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A domain's signing key (its public half in the stand-in's DNS). */
export class DkimKey {
  constructor(
    readonly domain: string,
    readonly selector: string,
    private readonly privateKey: string,
  ) {}

  /** `raw` (CRLF lines) with a DKIM-Signature of this key on top (relaxed/relaxed, rsa-sha256, From and the usual headers signed). */
  async sign(raw: string | Buffer, extra: { headerList?: string[]; maxBodyLength?: number } = {}): Promise<string> {
    const result = await dkimSign(Buffer.from(raw), {
      canonicalization: 'relaxed/relaxed',
      algorithm: 'rsa-sha256',
      signatureData: [{ signingDomain: this.domain, selector: this.selector, privateKey: this.privateKey, ...(extra.maxBodyLength !== undefined ? { maxBodyLength: extra.maxBodyLength } : {}) }],
      // mailauth's signer takes the list as one colon-separated string (an array is ignored).
      ...(extra.headerList ? { headerList: extra.headerList.join(':') } : {}),
    } as unknown as Parameters<typeof dkimSign>[1]);
    if (result.errors?.length) throw new Error(`could not sign: ${result.errors.map((e) => String(e)).join('; ')}`);
    return `${result.signatures}${Buffer.from(raw).toString('utf8')}`;
  }
}
