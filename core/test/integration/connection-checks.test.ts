// Connection checks (issue 32 §1): the Checks page's "test the connection now" for the
// plugins that talk to a server, through the real core (its admin API, with the bearer
// token), the real plugin host and the plugins' own processes, against real servers from
// Debian on 127.0.0.1: Dovecot (IMAP) and Postfix (SMTP, logins checked by Dovecot) for the
// email plugin (support/mail-servers.ts), Radicale for calendar and reminders
// (support/radicale.ts). A right password passes; a wrong one shows the server's own words
// at the login step (the plugin failed to start on it: the check runs in a process started
// for it alone); a closed port shows the connect step, a plaintext port taken for TLS the
// TLS step, a name that does not resolve the DNS step.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import type { Browser } from 'puppeteer-core';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { ConnectionReport } from '../../src/plugins/connection-checks.js';
import { freePort, ROOT, Stack, until } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';
import { MailServers } from '../support/mail-servers.js';
import { Radicale } from '../support/radicale.js';

const TOKEN = 'connection-checks-admin-token-0123';
const AGENT = { address: 'agent@example.test', password: 'Ag3nt-check-s3cret-1Wd' };
const DAV = { username: 'carapace', password: 'Dav-check-s3cret-5Rt' };
const WRONG = 'not-the-password-Zz9';

let mail: MailServers;
let radicale: Radicale;
let stack: Stack;
let admin: FastifyInstance;
let base: string;
let closedPort: number;
let browser: Browser | undefined;
const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');

function config(over: { email?: Record<string, unknown>; calendar?: Record<string, unknown>; reminders?: Record<string, unknown> } = {}): Record<string, unknown> {
  const email = mail.pluginSettings(AGENT);
  return {
    groups: { main: {} },
    plugins: {
      email: { ...email, mailboxes: { main: { folders: ['INBOX'] } }, poll_interval_s: 600, ...over.email },
      calendar: { server_url: radicale.url, username: DAV.username, password: '${CALDAV_PASSWORD}', groups: { main: { calendars: ['Family'] } }, ...over.calendar },
      reminders: { server_url: radicale.url, username: DAV.username, password: '${CALDAV_PASSWORD}', ...over.reminders },
    },
  };
}

async function check(plugin: string): Promise<ConnectionReport> {
  const res = await fetch(`${base}/connection-checks/${plugin}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as ConnectionReport;
}

/** `make doctor`'s command against this core: its exit code and what it printed. */
const doctor = () =>
  new Promise<{ code: number; out: string }>((resolve) => {
    execFile(process.execPath, [join(ROOT, 'dist/core/src/admin/cli.js'), 'doctor'], { env: { PATH: process.env.PATH, CARAPACE_ADMIN_URL: base, CARAPACE_ADMIN_TOKEN: TOKEN } }, (err, stdout) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout }),
    );
  });

const result = (report: ConnectionReport, prefix: string) => report.results.find((r) => r.name.startsWith(prefix));

/** Writes carapace.json and waits until each named plugin has settled on it (healthy or failed). */
async function reconfigure(raw: Record<string, unknown>, plugins: string[]): Promise<void> {
  const since = new Date().toISOString();
  await stack.writeConfig(raw);
  await until(() => plugins.every((p) => stack.core.audit.query({ since }).some((e) => e.source === p && e.stage === 'plugin' && (e.reason === 'initialized' || /failed to initialize/.test(e.reason ?? '')))), 30_000);
}

beforeAll(async () => {
  mail = await MailServers.start([AGENT]);
  radicale = await Radicale.start([DAV]);
  await radicale.makeCalendar('family', 'Family', ['VEVENT']);
  await radicale.makeCalendar('reminders', 'Reminders', ['VTODO']);
  closedPort = await freePort();
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { email: join(ROOT, 'plugins/email'), calendar: join(ROOT, 'plugins/calendar'), reminders: join(ROOT, 'plugins/reminders') },
    env: { EMAIL_PASSWORD: AGENT.password, CALDAV_PASSWORD: DAV.password },
    config: config(),
  });
  for (const p of ['email', 'calendar', 'reminders']) if (stack.core.catalog.state(p) !== 'healthy') throw new Error(`${p} not healthy:\n${stack.hostOutput}\n${mail.output}\n${radicale.output}`);
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { console: {}, checks: async () => ({ ok: true, checks: [] }) });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await admin?.close();
  await stack?.stop();
  await radicale?.stop();
  await mail?.stop();
});

describe('connection checks through the admin API', () => {
  it('lists the configured plugins that offer one, and needs the admin token', async () => {
    const res = await fetch(`${base}/connection-checks`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await res.json()) as { checks: { plugin: string }[] }).checks.map((c) => c.plugin).sort()).toEqual(['calendar', 'email', 'reminders']);
    expect((await fetch(`${base}/connection-checks/email`, { method: 'POST' })).status).toBe(401);
    // A plugin that offers none (or does not exist) has none to run.
    expect((await fetch(`${base}/connection-checks/telegram`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  });

  it('the right passwords: IMAP logs in and lists INBOX, SMTP greets and takes the login, CalDAV lists the calendars; nothing is sent', async () => {
    const email = await check('email');
    expect(email).toMatchObject({ plugin: 'email', ok: true, error: null });
    expect(result(email, 'IMAP')).toMatchObject({ ok: true, step: 'listing', message: expect.stringContaining('logged in as agent@example.test; the server lists INBOX') });
    expect(result(email, 'SMTP')).toMatchObject({ ok: true, step: 'login', message: expect.stringContaining('took the login of agent@example.test (no mail was sent)') });
    expect((await check('calendar')).results).toEqual([{ name: `CalDAV http://127.0.0.1:${radicale.port}`, ok: true, step: 'listing', message: 'logged in as carapace; the calendar home /carapace/ lists 1 calendar: "Family"' }]);
    expect((await check('reminders')).results[0]).toMatchObject({ ok: true, step: 'listing', message: expect.stringContaining('1 reminder list: "Reminders"') });
    expect(await mail.inbox(AGENT)).toEqual([]);
    // Audited, in names and steps.
    expect(stack.core.audit.query({}).filter((e) => /^connection check of plugin "email"/.test(e.reason ?? '')).at(-1)).toMatchObject({ source: 'admin-api', outcome: 'ok' });
  }, 60_000);

  it('one check at a time per plugin: a second ask while one runs gets the same answer', async () => {
    const [a, b] = await Promise.all([check('email'), check('email')]);
    expect(a.at).toBe(b.at);
    expect(a).toEqual(b);
  }, 30_000);

  it('make doctor logs in to each server too: a line per server, and "works" when all do', async () => {
    const { code, out } = await doctor();
    expect(out).toMatch(/^✓ Connection of email, IMAP .*: logged in as agent@example\.test; the server lists INBOX/m);
    expect(out).toMatch(/^✓ Connection of email, SMTP .*: .*took the login of agent@example\.test \(no mail was sent\)/m);
    expect(out).toContain(`✓ Connection of calendar, CalDAV http://127.0.0.1:${radicale.port}: logged in as carapace; the calendar home /carapace/ lists 1 calendar: "Family"`);
    expect(out).toMatch(/^✓ Connection of reminders, /m);
    expect(out).toContain('Everything the appliance needs works.');
    expect(code).toBe(0);
  }, 60_000);

  it('a wrong password: the plugin fails to start, and its check shows the login step in the server\'s own words, never the password', async () => {
    const server = (port: number) => ({ host: '127.0.0.1', port, secure: false, user: AGENT.address, password: WRONG });
    await reconfigure(config({ email: { imap: server(mail.imapPort), smtp: server(mail.smtpPort) }, calendar: { password: WRONG }, reminders: { password: WRONG } }), ['email', 'calendar', 'reminders']);
    // It did not start: the check ran in a process started for it alone.
    expect(stack.core.catalog.state('email')).toBe('failed');
    const email = await check('email');
    expect(email.ok).toBe(false);
    // Dovecot's and Postfix's own words.
    expect(result(email, 'IMAP')).toMatchObject({ ok: false, step: 'login', message: expect.stringMatching(/refused the login of agent@example\.test: .*\[AUTHENTICATIONFAILED\] Authentication failed\./) });
    expect(result(email, 'SMTP')).toMatchObject({ ok: false, step: 'login', message: expect.stringContaining('535 5.7.8 Error: authentication failed') });
    const calendar = await check('calendar');
    expect(calendar.results[0]).toMatchObject({ ok: false, step: 'login', message: 'the server refused the login of carapace: HTTP 401 Unauthorized: Access to the requested resource forbidden.' });
    expect(stack.core.catalog.state('calendar')).toBe('failed');
    expect(JSON.stringify([email, calendar, stack.core.audit.query({})])).not.toContain(WRONG);
    // make doctor says the same, with the fix, and fails.
    const { code, out } = await doctor();
    expect(out).toMatch(/^✗ Connection of email, IMAP .*: failed at the login step: .*\[AUTHENTICATIONFAILED\] Authentication failed\./m);
    expect(out).toContain('✗ Connection of calendar, CalDAV');
    expect(out).toContain('Fix: check the server, port, user and password of "calendar"');
    expect(out).toContain('Something is broken: see the fixes above.');
    expect(out).not.toContain(WRONG);
    expect(code).toBe(1);
  }, 90_000);

  it('the Checks page: a row per plugin with a check; the button tests it now and shows the failed step and the server\'s words as text', async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchBrowser();
    const page = await browser.newPage();
    await page.goto(`${base}/`);
    await logIn(page, TOKEN);
    await page.waitForSelector('nav a[href="#/checks"]', { timeout: 30_000 });
    await page.click('nav a[href="#/checks"]');
    await page.waitForSelector('.connection[data-plugin="email"] button.test-connection', { timeout: 30_000 });
    expect(await page.$$eval('.connection', (cards) => cards.map((c) => c.getAttribute('data-plugin')).sort())).toEqual(['calendar', 'email', 'reminders']);
    const since = new Date().toISOString();
    await page.click('.connection[data-plugin="email"] button.test-connection');
    await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'console' && /^connection check of plugin "email"/.test(e.reason ?? '')), 20_000);
    await page.waitForFunction(() => !document.querySelector('.connection[data-plugin="email"] button.test-connection')?.hasAttribute('disabled'), { timeout: 20_000 });
    const shown = await page.$$eval('.connection[data-plugin="email"] .connection-result', (rows) => rows.map((r) => ({ ok: r.getAttribute('data-ok'), step: r.getAttribute('data-step'), text: (r as HTMLElement).innerText })));
    expect(shown).toHaveLength(2);
    expect(shown[0]).toMatchObject({ ok: 'false', step: 'login', text: expect.stringMatching(/✗ IMAP 127\.0\.0\.1:\d+ failed at: login\n?.*Authentication failed\./) });
    expect(shown[1]).toMatchObject({ ok: 'false', step: 'login', text: expect.stringContaining('535 5.7.8 Error: authentication failed') });
    expect(await page.$eval('.connection[data-plugin="email"]', (c) => c.getAttribute('data-status'))).toBe('fail');
    await page.screenshot({ path: join(SHOTS, 'checks-connections.png') as `${string}.png`, fullPage: true });
    await page.close();
  }, 120_000);

  it('a closed port shows the connect step; a plaintext port taken for TLS the TLS step; a name that does not resolve the DNS step', async () => {
    const server = (port: number, extra: Record<string, unknown> = {}) => ({ host: '127.0.0.1', port, secure: false, user: AGENT.address, password: '${EMAIL_PASSWORD}', ...extra });
    await reconfigure(config({ email: { imap: server(closedPort), smtp: server(mail.smtpPort, { secure: true }) }, calendar: { server_url: `http://127.0.0.1:${closedPort}/` }, reminders: { server_url: 'http://caldav.does-not-exist.invalid/' } }), ['email', 'calendar', 'reminders']);
    const email = await check('email');
    expect(result(email, 'IMAP')).toMatchObject({ ok: false, step: 'connect', message: `127.0.0.1:${closedPort} refused the connection (ECONNREFUSED): nothing listens on that port` });
    expect(result(email, 'SMTP')).toMatchObject({ ok: false, step: 'tls', message: expect.stringContaining('wrong version number') });
    expect((await check('calendar')).results[0]).toMatchObject({ ok: false, step: 'connect', message: expect.stringContaining('ECONNREFUSED') });
    expect((await check('reminders')).results[0]).toMatchObject({ ok: false, step: 'dns', message: expect.stringContaining('caldav.does-not-exist.invalid does not resolve') });
  }, 90_000);

  it('bounded: a server that never greets ends the check within 15 s at the connect step; https to a plaintext CalDAV port at the TLS step', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const silentPort = (silent.address() as AddressInfo).port;
    try {
      const server = (port: number) => ({ host: '127.0.0.1', port, secure: false, user: AGENT.address, password: '${EMAIL_PASSWORD}' });
      await reconfigure(config({ email: { imap: server(silentPort), smtp: server(mail.smtpPort) }, calendar: { server_url: `https://127.0.0.1:${radicale.port}/` } }), ['email', 'calendar']);
      const started = Date.now();
      const email = await check('email');
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(result(email, 'IMAP')).toMatchObject({ ok: false, step: 'connect' });
      expect(result(email, 'SMTP')).toMatchObject({ ok: true, step: 'login' });
      expect((await check('calendar')).results[0]).toMatchObject({ ok: false, step: 'tls' });
    } finally {
      silent.close();
    }
  }, 90_000);
});
