// Done when a new user reaches a working agent in the browser with only .env edited:
// compose.yaml as it is, no carapace.json (the core writes the default), no Telegram bot,
// the admin token from the core's container (`make token`), the doctor inside the core's
// container (`make doctor`), then in a real browser (Debian's chromium): log in, open the
// web chat, write, and see the real Claude Code in a real agent container answer through
// send_webchat, with the tool call shown as it happens.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { LoopStorage } from '../../src/agents/storage.js';
import { ROOT } from '../harness.js';
import { AGENT_IMAGE } from '../support/agents.js';
import { AnthropicStandIn, hasTool, toolResults } from '../support/anthropic-standin.js';
import { bridgeGateway, ComposeProject, type Health } from '../support/compose.js';

const MODEL_KEY = 'sk-ant-api03-first-run-test-key-0123456789abcdef';
const REPLY = 'Hello! Your agent is here and listening.';
const DOCKER = process.env.DOCKER || 'docker';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');
const name = `carapace-firstrun-${process.pid}`;
let project: ComposeProject;
let model: AnthropicStandIn;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install chromium`);
  mkdirSync(SHOTS, { recursive: true });
  // The model: reply through the web chat's tool, then end the turn.
  model = new AnthropicStandIn((request) => {
    if (!hasTool(request, 'Bash')) return [{ type: 'text', text: 'ok' }];
    if (toolResults(request).length === 0) {
      return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.send_webchat '${JSON.stringify({ recipient: 'console', body: REPLY })}'`, description: 'Reply' } }];
    }
    return [{ type: 'text', text: 'Replied.' }];
  });
  model.modelKey = MODEL_KEY;
  const modelUrl = await model.start(bridgeGateway(DOCKER));
  // Nothing but .env: the model key (and here, where the model stand-in is).
  project = await ComposeProject.create({ name, file: join(ROOT, 'compose.yaml'), env: { ANTHROPIC_API_KEY: MODEL_KEY, CARAPACE_MODEL_API_URL: modelUrl, TELEGRAM_BOT_TOKEN: '' } });
  project.run(['up', '-d', 'core', 'plugins']);
  const ready = (h: Health): boolean => h.plugins.healthy.includes('webchat');
  const health = await project.waitForHealth(ready);
  if (!(health && ready(health))) throw new Error(`the appliance did not become healthy:\n${project.run(['logs', '--tail', '80'])}`);
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  try {
    project?.down();
  } finally {
    const left = execFileSync(DOCKER, ['ps', '-aq', '--filter', `label=carapace.instance=${name}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
    if (left.length > 0) execFileSync(DOCKER, ['rm', '-f', ...left]);
    if (project) await new LoopStorage(new DockerRuntime(), { groupsDir: join(project.volumes, 'groups'), instance: name }, { image: AGENT_IMAGE, disk_quota_mb: 2048 }).destroy('main', true);
    project?.removeVolumes();
    await model?.stop();
  }
}, 120_000);

describe('first run with only .env', () => {
  it('wrote a default carapace.json (group main; Telegram set up but off) and an admin token', () => {
    const config = JSON.parse(readFileSync(join(project.volumes, 'config', 'carapace.json'), 'utf8')) as { groups: Record<string, unknown>; plugins: { telegram: { bot_token: string } } };
    expect(Object.keys(config.groups)).toEqual(['main']);
    expect(config.plugins.telegram.bot_token).toBe('${TELEGRAM_BOT_TOKEN}');
    // `make token`: the same command, in the core's container.
    const token = project.run(['exec', '-T', 'core', 'node', 'dist/core/src/admin/cli.js', 'token']).trim();
    expect(token).toBe(project.adminToken());
    expect(token.length).toBeGreaterThanOrEqual(32);
  });

  it('`make doctor` (in the core\'s container) finds the key good and Telegram only not set up', async () => {
    let out: string;
    try {
      // Not blocking this process: the model stand-in answers the key check from here.
      out = await project.runAsync(['exec', '-T', 'core', 'node', 'dist/core/src/admin/cli.js', 'doctor']);
    } catch (err) {
      throw new Error(`make doctor failed:\n${String((err as { stdout?: string }).stdout)}`);
    }
    expect(out).toContain('✓ Model key');
    expect(out).toContain('✓ Agent image');
    expect(out).toContain('! Plugin telegram: Not set up');
    expect(out).toContain('Everything the appliance needs works.');
  });

  it('in the browser: log in, open the web chat, write, and the real agent answers', async () => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 720 });
    const base = `http://127.0.0.1:${project.port}`;
    await page.goto(`${base}/`);
    await page.waitForSelector('#token');
    await page.type('#token', project.adminToken()!);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.waitForFunction(() => document.querySelector('nav')?.textContent?.includes('Web chat'));
    await page.waitForFunction(() => document.body.textContent?.includes('not configured'));
    await page.screenshot({ path: join(SHOTS, 'overview-first-run.png') as `${string}.png` });
    await Promise.all([page.waitForNavigation(), page.click('nav a[href="/plugins/webchat/"]')]);
    await page.waitForFunction(() => (document.querySelector('#group') as HTMLSelectElement | null)?.value === 'main');
    // Every state the page shows, recorded as it changes: "working…" must be among them.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { states: string[] }).states = seen;
      const state = document.querySelector('#state')!;
      new MutationObserver(() => seen.push(state.textContent ?? '')).observe(state, { childList: true, characterData: true, subtree: true });
    });
    await page.type('#text', 'hello, are you there?');
    await page.click('form button[type=submit]');
    // The person's message shows, the agent works, and its reply arrives through send_webchat.
    await page.waitForSelector('.msg.user');
    await page.waitForFunction((reply) => [...document.querySelectorAll('.msg.agent')].some((m) => m.textContent?.includes(reply)), { timeout: 150_000 }, REPLY);
    await page.waitForFunction(() => document.querySelector('#tools')?.textContent?.includes('send_webchat'), { timeout: 10_000 });
    await page.screenshot({ path: join(SHOTS, 'webchat.png') as `${string}.png` });
    expect(await page.evaluate(() => (window as unknown as { states: string[] }).states)).toContain('working…');
    const seen = model.requests.filter((r) => (r.body?.tools ?? []).length > 0);
    expect(JSON.stringify(seen[0].body.messages)).toContain('hello, are you there?');
    await page.close();
  }, 200_000);
});
