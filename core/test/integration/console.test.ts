// The web console over real HTTP, as an attacker on the same machine or another site sees
// it: nothing without a session, a session only for the admin token, no state change
// without the CSRF token, bounded live streams, and plugin panels that never see the
// console's credentials. The page-level flows run in a real browser (docker/console-browser).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import { Stack } from '../harness.js';

const TOKEN = 'console-test-token-0123456789';
let stack: Stack;
let admin: FastifyInstance;
let base: string;
let port: number;
let panel: Server;
const seenByPanel: { url: string; method: string; headers: IncomingHttpHeaders }[] = [];
let fixtureDown: string | null = null; // what the catalog says while the fixture's plugin is not up

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['guarded'] });
  const socket = join(stack.dir, 'fixture-panel.sock');
  panel = createServer((req, res) => {
    seenByPanel.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
    res.setHeader('set-cookie', 'planted=1');
    res.setHeader('content-security-policy', "script-src *");
    res.setHeader('content-type', 'text/plain');
    res.end(`panel says ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => panel.listen(socket, r));
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
    console: { loginPerMinute: 25, panels: () => [{ name: 'fixture', title: 'Fixture', socket, down: fixtureDown }, { name: 'gone', title: 'Gone', socket: join(stack.dir, 'none.sock') }] },
  });
  port = (admin.server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await admin?.close();
  panel?.close();
  await stack?.stop();
});

async function login(token = TOKEN): Promise<Response> {
  return fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
}

/** A logged-in client: its cookie and its CSRF token. */
async function session(): Promise<{ cookie: string; csrf: string }> {
  const res = await login();
  expect(res.status).toBe(204);
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
  const { token } = (await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string };
  return { cookie, csrf: token };
}

describe('console: without a session', () => {
  it('gives nothing: pages redirect to the login, the API, assets, events and panels are 401', async () => {
    const page = await fetch(`${base}/`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/login');
    for (const path of ['/api/overview', '/api/confirmations', '/api/audit', '/api/events', '/api/csrf', '/assets/app.js', '/assets/vendor/preact-htm.js', '/plugins/fixture/x']) {
      const res = await fetch(`${base}${path}`);
      expect([path, res.status]).toEqual([path, 401]);
      expect(await res.text()).not.toContain('data:');
    }
    expect(seenByPanel).toHaveLength(0);
    // The login page and its two files are the only public things.
    expect((await fetch(`${base}/login`)).status).toBe(200);
    expect((await fetch(`${base}/public/login.js`)).status).toBe(200);
  });

  it('a forged or stolen-looking cookie is no session', async () => {
    const res = await fetch(`${base}/api/overview`, { headers: { cookie: 'carapace_session=abc.def' } });
    expect(res.status).toBe(401);
  });
});

describe('console: login', () => {
  it('refuses a wrong token, and a token sent as a form (no CORS-free cross-site login)', async () => {
    const wrong = await login('not-the-token-at-all');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    const form = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `token=${TOKEN}` });
    expect(form.status).toBe(415);
    expect(form.headers.get('set-cookie')).toBeNull();
    expect(stack.core.audit.query({}).some((e) => e.source === 'console' && e.reason?.startsWith('console login refused'))).toBe(true);
  });

  it('the right token gives an HttpOnly, SameSite=Strict session cookie; logout ends it', async () => {
    const res = await login();
    expect(res.status).toBe(204);
    const setCookie = res.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^carapace_session=/);
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Strict/i);
    const cookie = setCookie.split(';')[0];
    const overview = await fetch(`${base}/api/overview`, { headers: { cookie } });
    expect(overview.status).toBe(200);
    expect(await overview.json()).toMatchObject({ plugin_host: true, plugins: [{ name: 'guarded', state: 'healthy', category: null }] });
    const { token } = (await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string };
    expect((await fetch(`${base}/logout`, { method: 'POST', headers: { cookie, 'x-csrf-token': token } })).status).toBe(204);
    expect((await fetch(`${base}/api/overview`, { headers: { cookie } })).status).toBe(401);
  });

  it('every page carries a strict Content-Security-Policy', async () => {
    const { cookie } = await session();
    for (const path of ['/login', '/']) {
      const csp = (await fetch(`${base}${path}`, { headers: { cookie } })).headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toContain('unsafe-eval');
    }
  });
});

describe('console: state changes', () => {
  it('a POST without the CSRF token is refused and changes nothing; with it, a real pending call is approved', async () => {
    const { cookie, csrf } = await session();
    const s = await stack.openSession('family');
    const call = stack.ipc(s, 'tool.invoke.delete_everything', { target: 'from-console' });
    let pending: { id: string }[] = [];
    for (let i = 0; i < 200 && pending.length === 0; i++) {
      pending = ((await (await fetch(`${base}/api/confirmations`, { headers: { cookie } })).json()) as { pending: { id: string }[] }).pending;
    }
    expect(pending).toHaveLength(1);
    const url = `${base}/api/confirmations/${pending[0].id}/approve`;
    const forged = await fetch(url, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{}' });
    expect(forged.status).toBe(403);
    expect(((await forged.json()) as { code: string }).code).toBe('CSRF_REFUSED');
    const wrongToken = await fetch(url, { method: 'POST', headers: { cookie, 'content-type': 'application/json', 'x-csrf-token': 'x'.repeat(40) }, body: '{}' });
    expect(wrongToken.status).toBe(403);
    expect(stack.core.confirmations.list()).toHaveLength(1);
    const ok = await fetch(url, { method: 'POST', headers: { cookie, 'content-type': 'application/json', 'x-csrf-token': csrf }, body: '{}' });
    expect(ok.status).toBe(200);
    const result = await call;
    expect(result.code).toBe(0);
    expect(stack.core.audit.query({}).some((e) => e.reason === 'confirmation approved by console')).toBe(true);
    await stack.core.closeSession(s.id);
  });

  it('another session\'s CSRF token does not work in this one', async () => {
    const a = await session();
    const b = await session();
    const res = await fetch(`${base}/logout`, { method: 'POST', headers: { cookie: a.cookie, 'x-csrf-token': b.csrf } });
    expect(res.status).toBe(403);
  });
});

describe('console: live events', () => {
  it('streams audit entries to a session, and refuses streams past the cap', async () => {
    const { cookie } = await session();
    const controller = new AbortController();
    const res = await fetch(`${base}/api/events`, { headers: { cookie }, signal: controller.signal });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    stack.core.audit.record({ group: 'family', session: null, source: 'test', topic: null, correlation: 'live-1', stage: 'core', outcome: 'ok', reason: 'live marker' });
    let text = '';
    while (!text.includes('live marker')) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    // 16 at once at most: the 17th is refused, not held.
    const open: AbortController[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 17; i++) {
      const c = new AbortController();
      open.push(c);
      statuses.push((await fetch(`${base}/api/events`, { headers: { cookie }, signal: c.signal })).status);
    }
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(16);
    expect(statuses[16]).toBe(503);
    for (const c of open) c.abort();
    // The server forgets the closed streams (the next test needs a free slot).
    const openNow = async () => ((await (await fetch(`${base}/api/overview`, { headers: { cookie } })).json()) as { live_streams: { open: number } }).live_streams.open;
    for (let i = 0; i < 100 && (await openNow()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await openNow()).toBe(0);
  });

  it('a reader that never reads is cut off, not buffered without limit', async () => {
    const { cookie } = await session();
    const before = process.memoryUsage().rss;
    // A raw socket that sends the request and then never reads a byte.
    const sock = connect(port, '127.0.0.1');
    sock.pause();
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write(`GET /api/events HTTP/1.1\r\nhost: x\r\ncookie: ${cookie}\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 200));
    const detail = 'x'.repeat(8000);
    for (let i = 0; i < 2000; i++) {
      stack.core.audit.record({ group: null, session: null, source: 'test', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: 'flood', detail });
      if (i % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    const overview = (await (await fetch(`${base}/api/overview`, { headers: { cookie } })).json()) as { live_streams: { dropped: number } };
    expect(overview.live_streams.dropped).toBeGreaterThanOrEqual(1);
    // 16 MB of events went out; the cut-off reader holds no more than its 1 MB allowance.
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 2 ** 20);
    sock.destroy();
  });
});

describe('console: plugin panels', () => {
  it('proxies to the plugin\'s socket without the console\'s cookie or CSRF token, and strips what would loosen the page', async () => {
    const { cookie, csrf } = await session();
    const res = await fetch(`${base}/plugins/fixture/hello/world?x=1`, { headers: { cookie, authorization: 'Bearer leak' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('panel says GET /hello/world?x=1');
    // The console's own (rolling) session cookie may come back; the plugin's never does.
    expect(res.headers.get('set-cookie') ?? '').not.toContain('planted');
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const seen = seenByPanel.at(-1)!;
    expect(seen.headers.cookie).toBeUndefined();
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-carapace-console']).toBe('1');
    // A state change to a panel needs the CSRF token like any other, and the panel never sees it.
    const count = seenByPanel.length;
    expect((await fetch(`${base}/plugins/fixture/send`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{"text":"hi"}' })).status).toBe(403);
    expect(seenByPanel).toHaveLength(count);
    const posted = await fetch(`${base}/plugins/fixture/send`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', 'x-csrf-token': csrf }, body: '{"text":"hi"}' });
    expect(await posted.text()).toBe('panel says POST /send');
    expect(seenByPanel.at(-1)!.headers['x-csrf-token']).toBeUndefined();
  });

  it('an unknown panel is 404 and a plugin that is not answering is a clear 502', async () => {
    const { cookie } = await session();
    expect((await fetch(`${base}/plugins/nope/`, { headers: { cookie } })).status).toBe(404);
    const gone = await fetch(`${base}/plugins/gone/`, { headers: { cookie } });
    expect(gone.status).toBe(502);
    expect(((await gone.json()) as { code: string }).code).toBe('UNAVAILABLE');
  });

  it('a panel whose plugin is not up yet (a core restart): the browser gets a page that says so and tries again, then the panel', async () => {
    const { cookie } = await session();
    const asPage = { cookie, accept: 'text/html,application/xhtml+xml' };
    fixtureDown = 'the plugin is starting';
    try {
      const waiting = await fetch(`${base}/plugins/fixture/?group=main`, { headers: asPage });
      expect(waiting.status).toBe(503);
      expect(waiting.headers.get('retry-after')).toBe('2');
      const page = await waiting.text();
      expect(page).toContain('<meta http-equiv="refresh" content="2">');
      expect(page).toContain('the Fixture page is not available: the plugin is starting');
      // A script is told in JSON, retriable.
      const api = await fetch(`${base}/plugins/fixture/api/x`, { headers: { cookie } });
      expect(await api.json()).toMatchObject({ code: 'UNAVAILABLE', retriable: true });
      // Nor is it in the menu meanwhile.
      const groups = (await (await fetch(`${base}/api/groups`, { headers: { cookie } })).json()) as { panels: { name: string }[] };
      expect(groups.panels.map((p) => p.name)).not.toContain('fixture');
    } finally {
      fixtureDown = null;
    }
    const back = await fetch(`${base}/plugins/fixture/?group=main`, { headers: asPage });
    expect(await back.text()).toBe('panel says GET /?group=main');
    // A panel that does not exist is not retried.
    const none = await fetch(`${base}/plugins/nope/`, { headers: asPage });
    expect(none.status).toBe(404);
    expect(await none.text()).not.toContain('refresh');
  });
});

describe('console: a token-guessing loop', () => {
  it('is rate-limited: past the tries a minute (25 here, 10 by default) even the right token waits', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 26; i++) statuses.push((await login(`guess-${i}-xxxxxxxxxxxxxxxx`)).status);
    expect(statuses).toContain(429);
    const right = await login();
    expect(right.status).toBe(429);
    expect(((await right.json()) as { code: string }).code).toBe('RATE_LIMITED');
  });
});
