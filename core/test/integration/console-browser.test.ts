// The console in a real browser (Debian's chromium, driven by puppeteer-core) against a
// real core and plugin host: log in, approve a real pending call from the page, follow its
// trail, and the attacks a browser makes possible: a page of another origin posting to the
// console, and a visitor without the session. Screenshots of each page go to
// $SCREENSHOT_DIR (default dist/screenshots); the README shows copies from docs/screenshots.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { GroupUsage } from '../../src/llm/budgets.js';
import type { DayUsage } from '../../src/llm/usage-store.js';
import type { ModelHealthReport } from '../../src/llm/model-health.js';
import { ROOT, Stack } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';

const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');
// A browser on a loaded machine (CI runs the Docker suites beside this one) once took the
// whole default 30 s for one test whose steps take 1.5 s here; each wait keeps its own 30 s.
jest.setTimeout(60_000);
const TOKEN = 'browser-test-token-0123456789';
let stack: Stack;
let admin: FastifyInstance;
let base: string;
let browser: Browser;
let evil: Server;
let evilBase: string;
let panel: Server;
let panelDown: string | null = null; // what the catalog says while the panel's plugin is not up
/** The model API as the LLM proxy last found it (the Overview's card). */
let model: ModelHealthReport = { ok: true, problem: null, last_ok: null };

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // crashinit fails as it starts: the Overview says why, not only that.
  stack = await Stack.start({ plugins: ['guarded', 'crashinit'], config: { groups: { family: { tools: ['*'] } } } });
  // A day of model use: the Usage page shows what it cost (claude-haiku-4-5: 1000 in at $1/M, 30000 out at $5/M).
  const day = new Date().toISOString().slice(0, 10);
  // And a day from before usage was priced (an upgraded installation): its cost was never recorded, which is not $0.00.
  const usageHistory = (): DayUsage[] => [
    { group: 'family', day, input_tokens: 1000, output_tokens: 30_000, cost_micros: 151_000, unpriced_tokens: 0, requests: 1 },
    { group: 'family', day: '2026-11-20', input_tokens: 600, output_tokens: 400, cost_micros: 0, unpriced_tokens: 1000, requests: 2 },
  ];
  // Today's budgets as the Overview shows them: $0.151 of a $1.00 day.
  const usage = (): GroupUsage[] => [{ group: 'family', day, input_tokens: 1000, output_tokens: 30_000, tokens: 31_000, requests: 1, cost_micros: 151_000, reserved_tokens: 0, reserved_micros: 0, tokens_per_day: 5_000_000, requests_per_minute: 60, requests_this_minute: 0, usd_per_day: 1 } as GroupUsage];
  // A plugin's panel (its page on a unix socket), up or not as `panelDown` says.
  const socket = join(stack.dir, 'panel.sock');
  panel = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end('<!doctype html><title>Notes</title><h1 id="panel">the notes panel</h1>');
  });
  await new Promise<void>((r) => panel.listen(socket, r));
  const panels = () => [{ name: 'notes', title: 'Notes', socket, down: panelDown }];
  // Each test logs in afresh: more than the default's ten a minute.
  const consoleDeps = { model: () => model, folders: [{ name: 'audit logs', path: join(stack.dir, 'logs') }, { name: 'workspaces', path: stack.dir, claims: () => 2 ** 44 }], usageHistory, panels, loginPerMinute: 25 };
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { usage, console: consoleDeps });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  // Another origin on the same host (other port: same site, so SameSite does not stop its
  // requests carrying the cookie; only the CSRF token does): a page that tries to
  // answer the console's pending confirmation with the visitor's cookie.
  evil = createServer((req, res) => {
    const target = decodeURIComponent((req.url ?? '/').slice(1));
    res.setHeader('content-type', 'text/html');
    res.end(`<form id="f" method="post" action="${base}${target}"><input name="x" value="1"></form>
      <script>fetch(${JSON.stringify(base + target)}, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{}' })
        .finally(() => document.getElementById('f').submit());</script>`);
  });
  await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
  evilBase = `http://127.0.0.1:${(evil.address() as AddressInfo).port}`;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  evil?.close();
  panel?.close();
  await admin?.close();
  await stack?.stop();
});

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) as `${string}.png`, fullPage: true });
}

/** A fresh browser profile (no cookies) that logs in. */
async function loggedIn(): Promise<Page> {
  const page = await (await browser.createBrowserContext()).newPage();
  await page.setViewport({ width: 1200, height: 760 });
  await page.goto(`${base}/`);
  await logIn(page, TOKEN);
  return page;
}

/** The ipc call's pending confirmation, once the core holds it. */
async function pendingCall(target: string) {
  const session = await stack.openSession('family');
  const call = stack.ipc(session, 'tool.invoke.delete_everything', { target });
  for (let i = 0; i < 200 && stack.core.confirmations.list().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  const [pending] = stack.core.confirmations.list();
  return { session, call, pending };
}

describe('console in a browser', () => {
  it('a wrong token is refused on the page; the right one opens the overview', async () => {
    const page = await (await browser.createBrowserContext()).newPage();
    await page.setViewport({ width: 1200, height: 760 });
    await page.goto(`${base}/`);
    expect(page.url()).toBe(`${base}/login`);
    await shot(page, 'login');
    await page.type('#token', 'not-the-admin-token');
    await page.click('button[type=submit]');
    await page.waitForFunction(() => document.getElementById('error')?.textContent !== '');
    expect(await page.$eval('#error', (e) => e.textContent)).toContain('wrong admin token');
    expect(page.url()).toBe(`${base}/login`);
    // Nothing about the token ever reaches a URL.
    expect(page.url()).not.toContain('token');
    await page.close();
    const ok = await loggedIn();
    // The overview's own plugin table (the menu says "Plugins" too, before the page has loaded).
    await ok.waitForFunction(() => document.querySelector('main')?.textContent?.includes('guarded'), { timeout: 30_000 });
    await shot(ok, 'overview');
    await ok.browserContext().close();
  });

  it('a pending high-risk call shows its complete arguments; Approve in the page gives the caller its result', async () => {
    const page = await loggedIn();
    const { session, call, pending } = await pendingCall('approved-in-the-browser');
    await page.goto(`${base}/#/approvals`);
    await page.waitForSelector(`.pending[data-id="${pending.id}"]`);
    expect(await page.$eval(`.pending[data-id="${pending.id}"] .args`, (e) => e.textContent)).toContain('approved-in-the-browser');
    await shot(page, 'approvals');
    await page.click(`.pending[data-id="${pending.id}"] button.approve`);
    const result = await call;
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('approved-in-the-browser');
    await page.waitForFunction((id) => !document.querySelector(`.pending[data-id="${id}"]`), {}, pending.id);

    // The activity page shows that call's trail, up to the approval by the console.
    await page.goto(`${base}/#/activity/${pending.correlation}`);
    await page.waitForSelector('.trail');
    await page.waitForFunction(() => document.querySelector('.trail')?.textContent?.includes('confirmation approved by console'));
    const trail = await page.$eval('.trail', (e) => e.textContent ?? '');
    expect(trail).toContain('pending');
    expect(trail).toContain('routed');
    await shot(page, 'activity');
    await stack.core.closeSession(session.id);
    await page.browserContext().close();
  });

  it('a page of another origin cannot answer a confirmation with the visitor\'s session', async () => {
    const page = await loggedIn();
    const { session, call, pending } = await pendingCall('cross-site');
    const audited = () => stack.core.audit.query({ correlation: pending.correlation }).filter((e) => e.reason?.startsWith('confirmation')).length;
    for (const path of [`/api/confirmations/${pending.id}/deny`, '/logout']) {
      const attack = await page.browserContext().newPage();
      await attack.goto(`${evilBase}/${encodeURIComponent(path)}`);
      await new Promise((r) => setTimeout(r, 300));
      await attack.close();
    }
    // Still pending, nothing answered, and the visitor is still logged in.
    expect(stack.core.confirmations.get(pending.id)).toBeDefined();
    expect(audited()).toBe(0);
    await page.goto(`${base}/#/approvals`);
    await page.waitForSelector(`.pending[data-id="${pending.id}"]`);
    await page.click(`.pending[data-id="${pending.id}"] button.deny`);
    expect((await call).code).not.toBe(0);
    await stack.core.closeSession(session.id);
    await page.browserContext().close();
  });

  it('an opaque id: the page shows what it refers to; renamed meanwhile, the approval runs nothing, and the standing approval shows what it was given for', async () => {
    const session = await stack.openSession('family');
    const call = stack.ipc(session, 'tool.invoke.forget_note', { note_id: '60ce838e-rent' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('family', (p) => p.tool === 'forget_note');
    const page = await loggedIn();
    await page.goto(`${base}/#/approvals`);
    const card = `.pending[data-id="${pending.id}"]`;
    await page.waitForSelector(`${card} .state`);
    expect(await page.$eval(`${card} .state`, (e) => e.textContent)).toBe('The note "Pay the rent (do not delete)"');
    await shot(page, 'approvals-refers-to');
    // A pause, and the page seen again, while the agent points the id at something else.
    expect((await stack.ipc(session, 'tool.invoke.rename_note', { note_id: '60ce838e-rent', title: 'Old junk' })).code).toBe(0);
    await new Promise((r) => setTimeout(r, 500));
    await page.reload();
    await page.waitForSelector(`${card} button.allow`);
    expect(await page.$eval(`${card} .state`, (e) => e.textContent)).toBe('The note "Pay the rent (do not delete)"');
    await page.click(`${card} button.allow`);
    const r = await call;
    expect(r.code).not.toBe(0);
    expect(JSON.parse(r.stderr)).toMatchObject({ code: 'STATE_CHANGED' });
    await page.waitForFunction(() => document.querySelector('main')?.textContent?.includes('while it refers to:'), { timeout: 15_000 });
    expect(await page.$eval('pre.state', (e) => e.textContent)).toBe('The note "Pay the rent (do not delete)"');
    for (const a of stack.core.standing.list('family').filter((x) => x.tool === 'forget_note')) stack.core.revokeStanding(a.id, 'test');
    expect((await stack.ipc(session, 'tool.invoke.rename_note', { note_id: '60ce838e-rent', title: 'Pay the rent (do not delete)' })).code).toBe(0);
    await stack.core.closeSession(session.id);
    await page.browserContext().close();
  });

  it('the Overview shows what each group\'s model use cost today against its money budget', async () => {
    const page = await loggedIn();
    await page.goto(`${base}/#/`);
    await page.waitForFunction(() => document.querySelector('main')?.textContent?.includes('$0.15 of $1.00'), { timeout: 15_000 });
    await page.browserContext().close();
  });

  it('the Overview shows a model API not asked yet as neither good nor bad, with a hint; green once it answered, red when it refused', async () => {
    const page = await loggedIn();
    const card = async (): Promise<{ state: string | null; classes: string[]; text: string }> =>
      page.$eval('#model', (c) => ({ state: c.getAttribute('data-state'), classes: [...(c.querySelector('.big')?.classList ?? [])], text: (c as HTMLElement).innerText }));
    model = { ok: true, problem: null, last_ok: null };
    await page.goto(`${base}/#/`);
    await page.waitForSelector('#model');
    const fresh = await card();
    expect(fresh).toMatchObject({ state: 'not-asked', text: expect.stringContaining('not asked yet') });
    expect(fresh.classes).toContain('neutral');
    expect(fresh.classes).not.toContain('ok');
    expect(fresh.classes).not.toContain('bad');
    expect(fresh.text).toContain('Checks tests the key now');
    await shot(page, 'overview-model-not-asked');
    model = { ok: true, problem: null, last_ok: new Date().toISOString() };
    await page.reload();
    await page.waitForFunction(() => document.querySelector('#model')?.getAttribute('data-state') === 'answering', { timeout: 15_000 });
    expect((await card()).classes).toContain('ok');
    model = { ok: false, problem: { kind: 'key_refused', message: 'the model API refuses the key in ANTHROPIC_API_KEY', status: 401, upstream: 'invalid x-api-key', since: new Date().toISOString() }, last_ok: null };
    await page.reload();
    await page.waitForFunction(() => document.querySelector('#model')?.getAttribute('data-state') === 'refused', { timeout: 15_000 });
    expect((await card()).classes).toContain('bad');
    model = { ok: true, problem: null, last_ok: null };
    await page.browserContext().close();
  });

  it('the Overview says why a plugin failed, and when new workspaces may claim more than the disk has', async () => {
    const page = await loggedIn();
    await page.goto(`${base}/#/`);
    await page.waitForFunction(() => document.querySelector('main')?.textContent?.includes('crashinit'), { timeout: 15_000 });
    const row = await page.$$eval('tr', (rows) => rows.map((r) => r.textContent ?? '').find((t) => t.startsWith('crashinit')));
    expect(row).toContain('failed');
    expect(row).toContain("Cannot read properties of undefined (reading 'value')");
    // 16 TiB of quotas not yet allocated, on a disk with less: red, and the figure.
    const claim = await page.$$eval('td', (cells) => cells.filter((c) => c.textContent?.includes('new workspaces may still claim')).map((c) => ({ text: c.textContent, bad: c.classList.contains('bad') })));
    expect(claim).toEqual([{ text: expect.stringContaining('new workspaces may still claim 16384.0 GiB'), bad: true }]);
    await shot(page, 'overview-problems');
    await page.browserContext().close();
  });

  it('a standing approval shows how often it may act and how often it did in the last hour', async () => {
    const granted = stack.core.grantStanding({ group: 'family', tool: 'delete_everything', arguments: { target: 'tmp-files' }, hours: 2, by: 'test', uses_per_hour: 3 });
    expect('id' in granted).toBe(true);
    const session = await stack.openSession('family');
    expect((await stack.ipc(session, 'tool.invoke.delete_everything', { target: 'tmp-files' })).code).toBe(0);
    const page = await loggedIn();
    await page.goto(`${base}/#/approvals`);
    await page.waitForFunction(() => document.querySelector('main')?.textContent?.includes('3 an hour (1 in the last hour)'), { timeout: 15_000 });
    if ('id' in granted) stack.core.revokeStanding(granted.id, 'test');
    await stack.core.closeSession(session.id);
    await page.browserContext().close();
  });

  it('a visitor without the session gets the login page and no data', async () => {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    for (const path of ['/#/approvals', '/api/confirmations', '/assets/app.js']) {
      const res = await page.goto(`${base}${path}`);
      const body = await page.evaluate(() => document.body.textContent ?? '');
      expect(body).not.toContain('delete_everything');
      expect([path, new URL(page.url()).pathname === '/login' || res?.status() === 401]).toEqual([path, true]);
    }
    await context.close();
  });

  it('a chat waiting to be paired shows on Groups & channels; connecting it into a new group maps it', async () => {
    const asked = stack.core.pairing.request('telegram', '4242', { name: 'Alice', text: 'hello, may I talk to your agent?' })!;
    const page = await loggedIn();
    await page.goto(`${base}/#/groups`);
    await page.waitForSelector(`.pairing[data-code="${asked.code}"]`);
    expect(await page.$eval(`.pairing[data-code="${asked.code}"]`, (e) => e.textContent)).toContain('may I talk to your agent');
    await shot(page, 'groups');
    await page.type(`.pairing[data-code="${asked.code}"] .new-group`, 'alice');
    await page.click(`.pairing[data-code="${asked.code}"] button.create`);
    await page.waitForFunction((code) => !document.querySelector(`.pairing[data-code="${code}"]`), {}, asked.code);
    const written = JSON.parse(readFileSync(stack.configFile, 'utf8')) as { groups: Record<string, unknown>; plugins: { telegram: { chats: Record<string, string> } } };
    expect(written.plugins.telegram.chats['4242']).toBe('alice');
    expect(written.groups).toHaveProperty('alice');
    await page.waitForFunction(() => document.querySelector('main')?.textContent?.includes('4242'));
    await page.browserContext().close();
  });

  it('a plugin page opened while its plugin is starting says so, and turns into the page by itself once it is up', async () => {
    panelDown = 'the plugin is starting';
    const page = await loggedIn();
    try {
      await page.goto(`${base}/plugins/notes/`);
      expect(await page.evaluate(() => document.body.textContent)).toContain('the Notes page is not available: the plugin is starting');
      panelDown = null;
      // Nobody presses anything: the page reloads itself.
      await page.waitForSelector('#panel', { timeout: 10_000 });
      expect(page.url()).toBe(`${base}/plugins/notes/`);
    } finally {
      panelDown = null;
      await page.browserContext().close();
    }
  });

  it('every page renders (screenshots)', async () => {
    const page = await loggedIn();
    for (const [name, marker] of [['agents', 'family'], ['usage', '32000 tokens in all, $0.15 at the prices'], ['usage', 'the cost of 1000 tokens spent before this version priced usage was not recorded'], ['usage', '400not recorded2'], ['checks', 'Check again']]) {
      await page.goto(`${base}/#/${name}`);
      await page.waitForFunction((m) => document.querySelector('main')?.textContent?.includes(m), { timeout: 15_000 }, marker);
      await shot(page, name);
    }
    await page.browserContext().close();
  });
});
