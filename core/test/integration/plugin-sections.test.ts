// A plugin's section of carapace.json checked by the core against the plugin's manifest
// `config_schema` (issue 32 §1, beside one-config.test.ts): an edit whose section does not
// fit is refused whole, the running configuration stays everywhere (the plugin is not
// started again), and the Overview and the Checks page say where, with the JSON pointer;
// a `${VAR}` reference passes where the schema asks something of a string's content (the
// host checks the value it fills in), not where it asks for a number. At start, a section
// that does not fit is said the same way. The real core, the real plugin host, real files.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import type { Session } from '../../src/boundary/session-table.js';
import { configCheck } from '../../src/doctor/checks.js';
import { Stack, until } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { AddressInfo } from 'node:net';

const GROUPS = { family: {} };
const GOOD = { groups: GROUPS, plugins: { mapped: { chats: { c1: 'family' }, token: '${MAPPED_TOKEN}' } } };
const ENV = { MAPPED_TOKEN: 'mapped-sections-token-0123456789', MAPPED_ENDPOINT: 'https://example.org' };

const TOKEN = 'plugin-sections-admin-token-0123';
let stack: Stack;
let session: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['mapped'], config: GOOD, env: ENV });
  session = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

async function pid(): Promise<number> {
  const r = await stack.ipc(session, 'tool.invoke.mapped_settings', {});
  expect(r.code).toBe(0);
  return r.out.pid as number;
}

const audited = (since: string, reason: RegExp) => stack.core.audit.query({ since }).find((e) => reason.test(e.reason ?? ''));

/** Writes the file as a person would (pretty-printed) and waits until the core has said it is broken. */
/**
 * Writes a broken carapace.json and waits until the core says so at `pointer`: an earlier
 * write's second file event (a write is a truncate and a write) may still be said after
 * `since`, naming the earlier problem (a clean CI run saw it).
 */
async function writeBroken(raw: Record<string, unknown>, pointer: string): Promise<void> {
  const since = new Date().toISOString();
  writeFileSync(stack.configFile, JSON.stringify(raw, null, 2));
  await until(() => audited(since, /^carapace\.json changed but is broken/) && stack.core.configStatus().problem?.pointer === pointer, 10_000);
}

describe('plugin sections checked at the core', () => {
  it('an edit with a wrong type in a plugin section is refused with its JSON pointer; the running configuration stays, the plugin is not started again', async () => {
    const before = await pid();
    const running = structuredClone(stack.core.config.plugins);
    // Line 9, column 9: "c1" in the pretty-printed file.
    await writeBroken({ groups: { ...GROUPS, cousins: {} }, plugins: { mapped: { chats: { c1: 5 }, token: '${MAPPED_TOKEN}' } } }, '/plugins/mapped/chats/c1');
    const problem = stack.core.configStatus().problem;
    expect(problem).toMatchObject({ pointer: '/plugins/mapped/chats/c1', field: 'plugins.mapped.chats.c1', line: 9, column: 9, message: 'the settings of plugin "mapped" do not fit its config_schema at /plugins/mapped/chats/c1: must be string' });
    expect(audited(new Date(Date.now() - 15_000).toISOString(), /^carapace\.json changed but is broken/)).toMatchObject({ code: 'CONFIG_INVALID', outcome: 'error' });
    // Nothing of the edit is taken: not the section, not the group beside it.
    expect(stack.core.config.plugins).toEqual(running);
    expect(stack.core.config.groups).not.toHaveProperty('cousins');
    expect(await pid()).toBe(before);
    // The Checks page (and make doctor) say where; the Overview gets the same problem (/api/overview: config).
    expect(configCheck(stack.core.configStatus())).toMatchObject({ status: 'fail', detail: expect.stringContaining('line 9, column 9 (/plugins/mapped/chats/c1): the settings of plugin "mapped" do not fit its config_schema') });
  }, 30_000);

  it('the Overview and the Checks page show it, with the JSON pointer, in a browser', async () => {
    const admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { console: {}, checks: async () => ({ ok: false, checks: [configCheck(stack.core.configStatus())] }) });
    const browser = await launchBrowser();
    try {
      const base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
      const page = await browser.newPage();
      await page.goto(`${base}/`);
      await logIn(page, TOKEN, '#config-problem .pointer');
      expect(await page.$eval('#config-problem .pointer', (e) => e.textContent)).toBe('/plugins/mapped/chats/c1');
      expect(await page.$eval('#config-problem', (e) => (e as HTMLElement).innerText)).toContain('line 9, column 9 (/plugins/mapped/chats/c1): the settings of plugin "mapped" do not fit its config_schema at /plugins/mapped/chats/c1: must be string');
      await page.goto(`${base}/#/checks`);
      await page.waitForSelector('.check[data-id="config"]', { timeout: 30_000 });
      expect(await page.$eval('.check[data-id="config"]', (e) => (e as HTMLElement).innerText)).toContain('(/plugins/mapped/chats/c1)');
    } finally {
      await browser.close();
      await admin.close();
    }
  }, 60_000);

  it('a ${VAR} reference passes where the schema asks for a pattern (the host checks the value), not where it asks for an integer; a literal that breaks the pattern is refused', async () => {
    await writeBroken({ groups: GROUPS, plugins: { mapped: { ...GOOD.plugins.mapped, endpoint: 'ftp://files.example.org' } } }, '/plugins/mapped/endpoint');
    expect(stack.core.configStatus().problem).toMatchObject({ pointer: '/plugins/mapped/endpoint', message: expect.stringContaining('must match pattern') });
    await writeBroken({ groups: GROUPS, plugins: { mapped: { ...GOOD.plugins.mapped, retries: '${MAPPED_RETRIES}' } } }, '/plugins/mapped/retries');
    expect(stack.core.configStatus().problem).toMatchObject({ pointer: '/plugins/mapped/retries', message: expect.stringContaining('must be integer') });
    // The reference in a string with a pattern: taken, and the plugin started again on it.
    const before = await pid();
    const since = new Date().toISOString();
    const withEndpoint = { groups: GROUPS, plugins: { mapped: { ...GOOD.plugins.mapped, endpoint: '${MAPPED_ENDPOINT}' } } };
    await stack.writeConfig(withEndpoint);
    expect(stack.core.configStatus().problem).toBeNull();
    expect(audited(since, /^carapace\.json is valid again/)).toBeDefined();
    await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'mapped' && e.reason === 'initialized'), 15_000);
    expect(await pid()).not.toBe(before);
    expect(stack.core.catalog.state('mapped')).toBe('healthy');
  }, 40_000);

  it('at start: a section that does not fit is said the same way, and only that plugin does not run', async () => {
    const started = await Stack.start({ plugins: ['mapped', 'echo'], config: { groups: GROUPS, plugins: { mapped: { chats: [], token: 'x' } } }, env: ENV });
    try {
      await until(() => started.core.configStatus().problem, 10_000);
      expect(started.core.configStatus().problem).toMatchObject({ pointer: '/plugins/mapped/chats', message: expect.stringContaining('must be object') });
      expect(started.core.audit.query({}).find((e) => e.code === 'CONFIG_INVALID')?.reason).toMatch(/^carapace\.json is wrong: .*; the plugin it concerns does not run until it is fixed$/);
      expect(started.core.catalog.state('mapped')).toBe('failed');
      expect(started.core.catalog.state('echo')).toBe('healthy');
    } finally {
      await started.stop();
    }
  }, 40_000);
});
