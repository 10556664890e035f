// The bundled fetch skill's script (skills/fetch/fetch.py) against a real relay on a unix
// socket, a TCP forwarder like the sandbox's, and a stand-in web server on loopback (a
// declared host: loopback is never public). HTML as text, redirects checked hop by hop,
// bounds, and each refusal's code. The same through a real sandbox and a public-looking
// stand-in: docker/skills.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { AllowList } from '../../src/network/allow-list.js';
import { SkillRelay } from '../../src/skills/skill-relay.js';
import { ROOT } from '../harness.js';
import { PAGE, standInRoutes } from '../support/web-standins.js';

let web: HttpServer;
let forwarder: Server;
let relay: SkillRelay;
let proxyPort: number;
let webPort: number;
const out = mkdtempSync(join(tmpdir(), 'fetch-out-'));

beforeAll(async () => {
  web = createHttpServer(standInRoutes(() => `http://127.0.0.1:${webPort}`));
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  webPort = (web.address() as { port: number }).port;
  const socketPath = join(mkdtempSync(join(tmpdir(), 'fetch-relay-')), 'r', 'relay.sock');
  relay = await SkillRelay.open({ skill: 'fetch', socketPath, allow: new AllowList(new Set([`127.0.0.1:${webPort}`])), public: true, resolve: async (host) => (host === 'private.test' ? ['10.9.8.7'] : Promise.reject(Object.assign(new Error('nx'), { code: 'ENOTFOUND' }))), log: pino({ level: 'silent' }), refused: () => undefined, more: () => undefined });
  forwarder = createServer((c) => {
    const u = connect(socketPath);
    for (const s of [c, u]) s.on('error', () => (c.destroy(), u.destroy()));
    c.pipe(u).pipe(c);
  });
  await new Promise<void>((resolve) => forwarder.listen(0, '127.0.0.1', resolve));
  proxyPort = (forwarder.address() as { port: number }).port;
});

afterAll(() => {
  relay?.close();
  forwarder?.close();
  web?.close();
});

function fetch(...args: string[]): Promise<{ code: number; answer: Record<string, any> }> {
  return new Promise((resolve) => {
    execFile('python3', [join(ROOT, 'skills/fetch/fetch.py'), ...args], { env: { CARAPACE_PROXY: `127.0.0.1:${proxyPort}`, OUT: out, PATH: process.env.PATH }, timeout: 60_000 }, (err, stdout) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, answer: JSON.parse(stdout) });
    });
  });
}

describe('fetch.py', () => {
  it('reads a page as the text a reader sees: title, headings, items, links; no script, style or hidden text', async () => {
    const { code, answer } = await fetch(`http://127.0.0.1:${webPort}/page.html`);
    expect(code).toBe(0);
    expect(answer).toMatchObject({ status: 200, title: PAGE.title, truncated: false, redirects: [] });
    expect(answer.text).toContain('# Carapace test page');
    expect(answer.text).toContain(PAGE.paragraph);
    expect(answer.text).toContain('- first item');
    for (const hidden of PAGE.hidden) expect(answer.text).not.toContain(hidden);
    expect(answer.links).toEqual([{ text: 'the other page', url: `http://127.0.0.1:${webPort}/other.html` }]);
  });

  it('follows a redirect, each hop through the relay', async () => {
    const { answer } = await fetch(`http://127.0.0.1:${webPort}/redirect-page`);
    expect(answer).toMatchObject({ status: 200, final_url: `http://127.0.0.1:${webPort}/page.html`, redirects: [{ status: 302, to: `http://127.0.0.1:${webPort}/page.html` }] });
  });

  it.each([
    ['/redirect-private', 'ADDRESS_NOT_PUBLIC'],
    ['/redirect-metadata', 'ADDRESS_NOT_PUBLIC'],
    ['/redirect-name', 'ADDRESS_NOT_PUBLIC'],
    ['/redirect-file', 'BAD_URL'],
    ['/redirect-loop', 'TOO_MANY_REDIRECTS'],
  ])('a redirect %s is refused: %s', async (path, code) => {
    const r = await fetch(`http://127.0.0.1:${webPort}${path}`);
    expect(r.code).toBe(2);
    expect(r.answer.error.code).toBe(code);
  });

  it.each([
    ['http://127.0.0.1:1/', 'ADDRESS_NOT_PUBLIC'],
    ['http://10.0.0.1/', 'ADDRESS_NOT_PUBLIC'],
    ['http://169.254.169.254/latest/meta-data/', 'ADDRESS_NOT_PUBLIC'],
    ['http://[::1]/', 'ADDRESS_NOT_PUBLIC'],
    ['http://private.test/', 'ADDRESS_NOT_PUBLIC'],
    ['http://nowhere.test/', 'DNS_FAILED'],
    ['file:///etc/passwd', 'BAD_URL'],
    ['ftp://example.org/', 'BAD_URL'],
  ])('%s is refused: %s', async (url, code) => {
    const r = await fetch(url);
    expect(r.code).toBe(2);
    expect(r.answer.error.code).toBe(code);
  });

  it('holds a large page to --max-bytes and its text to --max-chars; saves a file into /out', async () => {
    const big = await fetch(`http://127.0.0.1:${webPort}/big`, '--max-bytes', '100000');
    expect(big.answer).toMatchObject({ bytes: 100000, truncated: true });
    const chars = await fetch(`http://127.0.0.1:${webPort}/page.html`, '--max-chars', '20');
    expect(chars.answer.text.length).toBe(20);
    const saved = await fetch(`http://127.0.0.1:${webPort}/page.html`, '--save', 'page.html');
    expect(saved.answer.saved).toBe('page.html');
    expect(readFileSync(join(out, 'page.html'), 'utf8')).toContain('<title>');
    expect((await fetch(`http://127.0.0.1:${webPort}/page.html`, '--save', '../x')).answer.error.code).toBe('BAD_URL');
  });

  it('a server that never answers ends at --timeout', async () => {
    const started = Date.now();
    const r = await fetch(`http://127.0.0.1:${webPort}/stall`, '--timeout', '3');
    expect(r.answer.error.code).toBe('TIMEOUT');
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 20_000);
});
