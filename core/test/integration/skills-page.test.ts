// The console's Skills page in Chromium: each skill with where it comes from, what it may
// reach and which secrets it receives (named, set or not, never their values), and a skill
// that could not be loaded with its reason. The real core and the real skill discovery.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import type { Browser } from 'puppeteer-core';
import { startAdminApi } from '../../src/admin/http-api.js';
import { parseConfig } from '../../src/config.js';
import { skillViews } from '../../src/skills/skill-views.js';
import { skillRuns } from '../../src/skills/wiring.js';
import { ROOT, Stack } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';
import { skillRoots, writeSkill } from '../support/skill-folders.js';

const TOKEN = 'skills-page-token-0123456789';
const SECRET = 'fetch-token-value-8b1f3c';
const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');
let stack: Stack;
let admin: FastifyInstance;
let browser: Browser;
let base: string;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  stack = await Stack.start({ plugins: [] });
  const roots = skillRoots();
  writeSkill(roots.bundled, 'fetch', { manifest: { name: 'fetch', description: 'Read a web page', network: { public: true }, secrets: ['SKILL_FETCH_TOKEN'] }, files: { 'fetch.py': 'print(1)\n' } });
  writeSkill(roots.own, 'notes', { manifest: { name: 'notes', description: 'Sync notes', network: { hosts: ['notes.example.org'] }, secrets: ['SKILL_NOTES_KEY'] }, files: { 'sync.sh': 'true\n' } });
  writeSkill(roots.own, 'broken', { manifest: '{ not json' });
  const env = { SKILL_FETCH_TOKEN: SECRET };
  const wired = skillRuns({ programs: { runs: {} } as never, runtime: { docker: {}, hostPath: async (p: string) => p } as never, settings: parseConfig({}).sandbox, folders: roots, sections: {}, audit: stack.core.audit, log: pino({ level: 'silent' }), relayDir: join(stack.dir, 'relays'), env });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { console: { skills: () => skillViews(wired.runner, env) } });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await admin?.close();
  await stack?.stop();
});

describe('the Skills page', () => {
  it('lists each skill with its network and secrets, and why one is not offered', async () => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 700 });
    await page.goto(`${base}/`);
    await logIn(page, TOKEN);
    await page.goto(`${base}/#/skills`);
    await page.waitForSelector('tr[data-skill="notes"]');
    const row = (name: string, cell: string) => page.$eval(`tr[data-skill="${name}"] ${cell}`, (e) => e.textContent ?? '');
    expect(await row('fetch', '.network')).toBe('any host at a public address (never the local network)');
    expect(await row('fetch', '.secrets')).toBe('SKILL_FETCH_TOKEN set');
    expect(await row('notes', '.network')).toBe('notes.example.org');
    expect(await row('notes', '.secrets')).toBe('SKILL_NOTES_KEY not set in .env');
    expect(await page.$eval('tr[data-skill="notes"]', (e) => e.getAttribute('data-origin'))).toBe('own');
    expect(await row('broken', 'td')).toMatch(/Not offered: .*JSON/);
    // Named, never shown.
    expect(await page.evaluate(() => document.body.innerText)).not.toContain(SECRET);
    await page.screenshot({ path: join(SHOTS, 'skills.png') as `${string}.png`, fullPage: true });
  }, 60_000);
});
