// The console on a phone (390 px) and on a desktop (1280 px), and in dark mode: a real
// core and plugin host (with the webchat plugin's page), every console page in Debian's
// chromium. Nothing may widen the page past the screen (tables scroll inside their card),
// the content takes the phone's width instead of sharing it with a side bar, every
// navigation link can be reached, and with `prefers-color-scheme: dark` the pages are dark.
// Screenshots go to $SCREENSHOT_DIR (default dist/screenshots); the README shows copies of
// phone-overview, phone-approvals, phone-webchat and dark-overview from docs/screenshots.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { startAdminApi } from '../../src/admin/http-api.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { ROOT, Stack, until } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';

const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');
const TOKEN = 'layout-test-token-0123456789';
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 800 };
// Long words on purpose: a path and a value that a narrow screen must wrap or scroll.
const LONG_TARGET = '/app/volumes/groups/family/workspace/a-very-long-folder-name-that-does-not-fit-on-a-phone/and-a-file.txt';

let stack: Stack;
let admin: FastifyInstance;
let base: string;
let browser: Browser;
let cookie: string;

/** Each page: where it is and text that says it has loaded. */
const PAGES: [name: string, path: string, marker: string][] = [
  ['overview', '/#/overview', 'Model budgets today'],
  ['approvals', '/#/approvals', 'delete_everything'],
  ['activity', '/#/activity', 'tool.invoke.'],
  ['agents', '/#/agents', 'family'],
  ['usage', '/#/usage', 'Model tokens'],
  ['groups', '/#/groups', 'Groups and their tools'],
  ['checks', '/#/checks', 'Check again'],
  ['webchat', '/plugins/webchat/', 'Milk and eggs'],
];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  stack = await Stack.start({
    plugins: ['guarded'],
    extraPluginDirs: { webchat: join(ROOT, 'plugins/webchat') },
    config: { groups: { family: { tools: ['*'] }, 'a-second-group-with-a-long-name': {} } },
  });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
    console: {
      folders: [{ name: 'audit logs', path: join(stack.dir, 'logs') }],
      // The last backup failed, with a long reason: the Overview's card must still fit a phone.
      backups: () => ({
        schedule: 'daily', at: '03:30', keep: 7, dir: '/srv/carapace/backups', next_at: new Date(Date.now() + 3_600_000).toISOString(), running: false,
        last_ok_at: new Date(Date.now() - 86_400_000).toISOString(),
        last: { id: 'b1', at: new Date().toISOString(), kind: 'scheduled', ok: false, code: 'BACKUP_WORKSPACE_UNREADABLE', message: 'the workspace of group "a-second-group-with-a-long-name" (an ext4 image) could not be read: Docker cannot be reached (connect ENOENT /var/run/docker.sock)' },
      }),
      panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })),
    },
  });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  await until(() => (stack.core.catalog.state('webchat') === 'healthy' ? true : undefined), 15_000);

  // Something on every page: a conversation in the web chat, a pending confirmation with
  // long arguments (left pending), audit entries, a chat waiting to be paired.
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
  cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const csrf = ((await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string }).token;
  const sent = await fetch(`${base}/plugins/webchat/api/send?group=family`, {
    method: 'POST',
    headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'What is on my shopping list for the weekend?' }),
  });
  expect(sent.status).toBe(202);
  const session = await stack.openSession('family');
  const answer = await stack.ipc(session, 'tool.invoke.send_webchat', { recipient: 'console', body: 'Milk and eggs. And the long one: https://example.org/a/really/long/address/that/has/no/spaces/in/it/at/all/anywhere' });
  if (answer.code !== 0) throw new Error(`send_webchat: ${JSON.stringify(answer)}`);
  void stack.ipc(session, 'tool.invoke.delete_everything', { target: LONG_TARGET });
  await until(() => (stack.core.confirmations.list().length > 0 ? true : undefined), 5_000);
  stack.core.pairing.request('telegram', '987654321', { name: 'Someone with a long display name', text: 'hello, may I talk to your agent about the shopping list?' });

  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await admin?.close();
  await stack?.stop();
});

async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) as `${string}.png`, fullPage });
}

/** A fresh browser profile at this size, logged in through the login page. */
async function loggedIn(viewport: { width: number; height: number }, dark = false): Promise<Page> {
  const page = await (await browser.createBrowserContext()).newPage();
  await page.setViewport(viewport);
  if (dark) await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  await page.goto(`${base}/login`);
  await logIn(page, TOKEN);
  return page;
}

async function open(page: Page, path: string, marker: string): Promise<void> {
  await page.goto(`${base}${path}`);
  await page.waitForFunction((m) => document.querySelector('main')?.textContent?.includes(m), { timeout: 10_000 }, marker);
  await new Promise((r) => setTimeout(r, 100)); // layout settles (fonts, live updates)
}

interface Layout {
  scrollWidth: number;
  innerWidth: number;
  mainWidth: number;
  links: number;
  unreachable: string[];
}

/** The page's width against the viewport's, the main content's width, and which nav links cannot be brought on screen. */
function layout(page: Page): Promise<Layout> {
  return page.evaluate(() => {
    const main = document.querySelector('main')!;
    const links = [...document.querySelectorAll('nav a')] as HTMLElement[];
    const unreachable: string[] = [];
    for (const a of links) {
      a.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      const r = a.getBoundingClientRect();
      const x = r.left + r.width / 2;
      const y = r.top + r.height / 2;
      const onScreen = r.width > 0 && r.height > 0 && r.left >= -1 && r.right <= innerWidth + 1 && r.top >= -1 && r.bottom <= innerHeight + 1;
      const hit = onScreen ? document.elementFromPoint(x, y) : null;
      if (!hit || !(hit === a || a.contains(hit))) unreachable.push(a.textContent ?? '');
    }
    scrollTo(0, 0);
    return { scrollWidth: document.documentElement.scrollWidth, innerWidth, mainWidth: main.getBoundingClientRect().width, links: links.length, unreachable };
  });
}

/** Relative luminance (0 black … 1 white) of a computed CSS colour. */
function luminance(css: string): number {
  const [r, g, b] = (css.match(/[\d.]+/g) ?? []).slice(0, 3).map((v) => Number(v) / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

describe.each([
  ['phone', PHONE],
  ['desktop', DESKTOP],
])('on a %s', (label, viewport) => {
  it('the login page fits', async () => {
    const page = await (await browser.createBrowserContext()).newPage();
    await page.setViewport(viewport);
    await page.goto(`${base}/login`);
    await page.waitForSelector('#token');
    const l = await layout(page);
    expect(l.scrollWidth).toBeLessThanOrEqual(l.innerWidth + 1);
    if (label === 'phone') expect(l.mainWidth).toBeGreaterThanOrEqual(0.85 * l.innerWidth);
    await shot(page, `${label}-login`);
    await page.browserContext().close();
  });

  it('every page fits the width, the content takes it, and every nav link can be reached', async () => {
    const page = await loggedIn(viewport);
    const problems: string[] = [];
    for (const [name, path, marker] of PAGES) {
      await open(page, path, marker);
      const l = await layout(page);
      if (l.scrollWidth > l.innerWidth + 1) problems.push(`${name}: the page is ${l.scrollWidth} px wide in a ${l.innerWidth} px viewport`);
      if (label === 'phone' && l.mainWidth < 0.85 * l.innerWidth) problems.push(`${name}: the content is ${Math.round(l.mainWidth)} px of ${l.innerWidth}`);
      if (name !== 'webchat' && l.links < 8) problems.push(`${name}: ${l.links} nav links`);
      if (l.unreachable.length > 0) problems.push(`${name}: nav links out of reach: ${l.unreachable.join(', ')}`);
      await shot(page, `${label}-${name}`);
    }
    expect(problems).toEqual([]);
    await page.browserContext().close();
  }, 120_000);
});

describe('dark mode (prefers-color-scheme: dark)', () => {
  async function colours(page: Page) {
    return page.evaluate(() => {
      const style = (sel: string) => {
        const e = document.querySelector(sel);
        return e ? { bg: getComputedStyle(e).backgroundColor, fg: getComputedStyle(e).color } : null;
      };
      return { body: style('body')!, card: style('.card, body.login main'), input: style('input, select'), table: style('table') };
    });
  }

  it('the login page is dark, its text light, its field too', async () => {
    const page = await (await browser.createBrowserContext()).newPage();
    await page.setViewport(PHONE);
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
    await page.goto(`${base}/login`);
    await page.waitForSelector('#token');
    const c = await colours(page);
    expect(luminance(c.body.bg)).toBeLessThan(0.05);
    expect(luminance(c.body.fg)).toBeGreaterThan(0.6);
    expect(luminance(c.card!.bg)).toBeLessThan(0.08);
    expect(luminance(c.input!.bg)).toBeLessThan(0.08);
    expect(luminance(c.input!.fg)).toBeGreaterThan(0.6);
    await shot(page, 'dark-login');
    await page.browserContext().close();
  });

  it('the overview is dark, its text light, its cards and tables too', async () => {
    const page = await loggedIn(DESKTOP, true);
    await open(page, '/#/overview', 'Model budgets today');
    const c = await colours(page);
    expect(luminance(c.body.bg)).toBeLessThan(0.05);
    expect(luminance(c.body.fg)).toBeGreaterThan(0.6);
    expect(luminance(c.card!.bg)).toBeLessThan(0.08);
    expect(luminance(c.table!.bg)).toBeLessThan(0.08);
    await shot(page, 'dark-overview');
    for (const [name, path, marker] of PAGES.filter(([n]) => n !== 'overview')) {
      await open(page, path, marker);
      await shot(page, `dark-${name}`);
    }
    await page.setViewport(PHONE);
    await open(page, '/#/approvals', 'delete_everything');
    await shot(page, 'dark-phone-approvals');
    await page.browserContext().close();
  }, 120_000);
});
