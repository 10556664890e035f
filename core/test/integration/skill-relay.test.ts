// A skill's relay against real sockets: a unix socket as the sandbox has it, real TCP
// servers on loopback. What a skill's hosts allow, what "public" refuses (loopback,
// private, link-local, a name resolving to any of them, an address in another form), and
// its bounds: 1000 connections at once, a CONNECT sent slowly or far too long, a tunnel
// past its bytes; the relay answers the next CONNECT after each. The real sandbox and a
// public-looking stand-in: docker/skills.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { AllowList } from '../../src/network/allow-list.js';
import { isPublicUnicast, systemResolver, type Resolver } from '../../src/network/public-address.js';
import { RELAY_LIMITS, SkillRelay, type RefusalCode } from '../../src/skills/skill-relay.js';
import { connectThrough } from '../support/connect-client.js';

let echo: Server;
let port: number;
const relays: SkillRelay[] = [];
const refusals: { target: string; code: RefusalCode }[] = [];
const lookedUp: string[] = [];

const names: Record<string, string[]> = {
  'private.test': ['192.168.1.5'],
  'mixed.test': ['93.184.216.34', '10.0.0.1'],
  'metadata.test': ['169.254.169.254'],
  'v6local.test': ['::1'],
  'mapped.test': ['::ffff:127.0.0.1'],
};
const resolver: Resolver = async (host) => {
  lookedUp.push(host);
  if (Object.hasOwn(names, host)) return names[host];
  if (/^\d+$/.test(host) || /^0x/.test(host)) return systemResolver(host);
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

async function relay(opts: { hosts?: string[]; public?: boolean }): Promise<string> {
  const path = join(mkdtempSync(join(tmpdir(), 'relay-')), 'r', 'relay.sock');
  relays.push(await SkillRelay.open({ skill: 'test', socketPath: path, allow: new AllowList(new Set(opts.hosts ?? [])), public: opts.public ?? false, resolve: resolver, log: pino({ level: 'silent' }), refused: (target, code) => refusals.push({ target, code }), more: () => undefined }));
  return path;
}

beforeAll(async () => {
  echo = createServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  port = (echo.address() as { port: number }).port;
});

afterAll(async () => {
  for (const r of relays) r.close();
  echo.close();
});

async function roundTrip(path: string, target: string): Promise<string> {
  const a = await connectThrough(path, target);
  expect(a.status).toBe(200);
  a.socket.write('ping');
  const back = await new Promise<string>((resolve) => a.socket.once('data', (d: Buffer) => resolve(d.toString())));
  a.socket.destroy();
  return back;
}

describe('public unicast', () => {
  it.each([
    ['93.184.216.34', true], ['2606:2800:220:1:248:1893:25c8:1946', true], ['8.8.8.8', true],
    ['127.0.0.1', false], ['10.1.2.3', false], ['172.16.0.1', false], ['192.168.0.1', false], ['169.254.169.254', false], ['100.64.0.1', false], ['0.0.0.0', false], ['255.255.255.255', false], ['224.0.0.1', false],
    ['::1', false], ['fe80::1', false], ['fd00::1', false], ['::ffff:10.0.0.1', false], ['64:ff9b::a00:1', false], ['::', false], ['not-an-address', false],
  ])('%s: %s', (address, expected) => {
    expect(isPublicUnicast(address)).toBe(expected);
  });
});

describe("a skill's relay", () => {
  it('lets a skill reach the hosts it declares, and nothing else', async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`] });
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
    for (const target of [`127.0.0.1:${port + 1}`, `localhost:${port}`, 'example.org:443', `[::1]:${port}`]) {
      const a = await connectThrough(path, target);
      expect([a.status, a.headers['x-carapace-refused']]).toEqual([403, 'HOST_NOT_ALLOWED']);
    }
    expect(refusals.at(-1)).toEqual({ target: `[::1]:${port}`, code: 'HOST_NOT_ALLOWED' });
    expect((await connectThrough(path, 'no-port')).headers['x-carapace-refused']).toBe('BAD_TARGET');
  });

  it('"public": refuses every address that is not public unicast, a name resolving to one (any of its addresses), and other spellings of loopback', async () => {
    const path = await relay({ public: true });
    const cases: [string, RefusalCode][] = [
      [`127.0.0.1:${port}`, 'ADDRESS_NOT_PUBLIC'], ['10.0.0.8:80', 'ADDRESS_NOT_PUBLIC'], ['169.254.169.254:80', 'ADDRESS_NOT_PUBLIC'], ['[::1]:80', 'ADDRESS_NOT_PUBLIC'], ['[::ffff:127.0.0.1]:80', 'ADDRESS_NOT_PUBLIC'],
      ['private.test:80', 'ADDRESS_NOT_PUBLIC'], ['mixed.test:443', 'ADDRESS_NOT_PUBLIC'], ['metadata.test:80', 'ADDRESS_NOT_PUBLIC'], ['v6local.test:80', 'ADDRESS_NOT_PUBLIC'], ['mapped.test:80', 'ADDRESS_NOT_PUBLIC'],
      [`2130706433:${port}`, 'ADDRESS_NOT_PUBLIC'], [`0x7f000001:${port}`, 'ADDRESS_NOT_PUBLIC'],
      ['nowhere.test:80', 'DNS_FAILED'],
    ];
    for (const [target, code] of cases) {
      const a = await connectThrough(path, target);
      expect([target, a.status >= 400, a.headers['x-carapace-refused']]).toEqual([target, true, code]);
      expect(a.body).toContain(code);
    }
    expect(lookedUp).toEqual(expect.arrayContaining(['private.test', 'mixed.test', 'nowhere.test']));
    // A literal address is checked as it is: no name looked up for it.
    expect(lookedUp).not.toContain('10.0.0.8');
  });

  it('a skill with hosts and "public" reaches its declared hosts even when private (the person named them)', async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`], public: true });
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
  });
});

describe("the relay's bounds (it keeps answering)", () => {
  it(`1000 connections at once: at most ${RELAY_LIMITS.tunnels} are held, the rest closed; then it answers`, async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`] });
    const sockets = await Promise.all(Array.from({ length: 1000 }, () => new Promise<{ closed: Promise<boolean> }>((resolve) => {
      const s = connect(path);
      const closed = new Promise<boolean>((done) => {
        s.on('close', () => done(true));
        s.on('error', () => undefined);
        setTimeout(() => done(false), 3000);
      });
      s.on('connect', () => resolve({ closed }));
      s.on('error', () => resolve({ closed }));
    })));
    const closedEarly = (await Promise.all(sockets.map((s) => s.closed))).filter(Boolean).length;
    expect(closedEarly).toBeGreaterThanOrEqual(1000 - RELAY_LIMITS.tunnels);
    // The held ones time out (headersMs); meanwhile a run may be refused, never the core stalled.
    await new Promise((r) => setTimeout(r, RELAY_LIMITS.headersMs + 1000));
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
  }, 40_000);

  it('a CONNECT line far too long is refused (431) at once', async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`] });
    // 431, or the connection reset while the rest of the line was still being written.
    const a = await connectThrough(path, `${'a'.repeat(100_000)}.example:80`).catch((err: NodeJS.ErrnoException) => ({ status: err.code }));
    expect([431, 'ECONNRESET', 'EPIPE']).toContain(a.status);
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
  });

  it(`a CONNECT sent byte by byte, slowly, is closed after ${RELAY_LIMITS.headersMs / 1000} s`, async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`] });
    const s = connect(path);
    s.on('error', () => undefined);
    const started = Date.now();
    const line = `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n`;
    let i = 0;
    const drip = setInterval(() => (i < line.length ? s.write(line[i++]) : undefined), 500);
    await new Promise<void>((resolve) => s.on('close', () => resolve()));
    clearInterval(drip);
    expect(Date.now() - started).toBeLessThan(RELAY_LIMITS.headersMs + 5000);
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
  }, 30_000);

  it(`a tunnel is closed past ${RELAY_LIMITS.tunnelBytes / 1024 / 1024} MB`, async () => {
    const path = await relay({ hosts: [`127.0.0.1:${port}`] });
    const a = await connectThrough(path, `127.0.0.1:${port}`);
    let back = 0;
    a.socket.on('data', (d: Buffer) => (back += d.length));
    a.socket.on('error', () => undefined);
    const chunk = Buffer.alloc(1024 * 1024, 1);
    const closed = new Promise<void>((resolve) => a.socket.on('close', () => resolve()));
    for (let i = 0; i < 200 && !a.socket.destroyed; i++) {
      if (!a.socket.write(chunk)) await new Promise((r) => a.socket.once('drain', r).once('close', r));
    }
    await closed;
    // Both ways count: what went out and what came back together stay under the bound (plus a chunk in flight).
    expect(back).toBeLessThanOrEqual(RELAY_LIMITS.tunnelBytes);
    expect(await roundTrip(path, `127.0.0.1:${port}`)).toBe('ping');
  }, 30_000);
});
