// A typo in carapace.json: the real core process (main.js) and plugin host stay up in a
// safe mode instead of crash-looping. The console (login, Overview, Checks; in Chromium
// too), /health and /doctor say which file, line and column are wrong and what was
// expected; no plugin is loaded and nothing runs; fixing the file brings everything back
// without a restart, and the person's login outlives the safe mode.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { eventually, freePort, HOST_MAIN, pluginUidRange, ROOT, sleep, until } from '../harness.js';
import { launchBrowser, logIn } from '../support/browser.js';

const TOKEN = 'safe-mode-admin-token-0123456789';
const SHOTS = process.env.SCREENSHOT_DIR || join(ROOT, 'dist', 'screenshots');
// A comma missing at the end of line 3 (`"main": {}`): the error is at line 4, column 5.
const BROKEN = '{\n  "groups": {\n    "main": {}\n    "family": {}\n  }\n}\n';
const FIXED = '{\n  "groups": {\n    "main": {},\n    "family": {}\n  }\n}\n';

let dir: string;
let core: ChildProcess;
let host: ChildProcess;
let coreOut = '';
let hostOut = '';
let base = '';

function start(file: string, env: Record<string, string>, onOutput: (text: string) => void): ChildProcess {
  const child = spawn(process.execPath, [file], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => onOutput(d.toString()));
  child.stderr!.on('data', (d: Buffer) => onOutput(d.toString()));
  return child;
}

const bearer = (path: string) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-safe-'));
  chmodSync(dir, 0o711); // plugins run as uids of their own when the tests run as root
  mkdirSync(join(dir, 'config'));
  mkdirSync(join(dir, 'plugins'));
  symlinkSync(join(ROOT, 'plugins/webchat'), join(dir, 'plugins', 'webchat'));
  writeFileSync(join(dir, 'config', 'carapace.json'), BROKEN);
  const env = {
    CARAPACE_RUN_DIR: join(dir, 'run'),
    CARAPACE_CONFIG: join(dir, 'config', 'carapace.json'),
    CARAPACE_PLUGINS_DIR: join(dir, 'plugins'),
    CARAPACE_HANDLERS_DIR: join(ROOT, 'dist/plugins'),
    CARAPACE_DATA_DIR: join(dir, 'data'),
    CARAPACE_PLUGIN_FIRST_UID: String(pluginUidRange()),
  };
  mkdirSync(env.CARAPACE_RUN_DIR);
  // A fixed port, as in the appliance: the core serves the safe mode and then itself on it.
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  core = start(join(ROOT, 'dist/core/src/main.js'), { ...env, CARAPACE_LOG_DIR: join(dir, 'logs'), CARAPACE_ADMIN_PORT: String(port), CARAPACE_ADMIN_TOKEN: TOKEN, ANTHROPIC_API_KEY: 'sk-ant-test-key-0000000000' }, (t) => (coreOut += t));
  host = start(HOST_MAIN, env, (t) => (hostOut += t));
  await until(() => coreOut.includes(`"console":"${base}"`), 15_000);
});


afterAll(async () => {
  for (const child of [host, core]) {
    if (child?.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  }
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('a broken carapace.json', () => {
  let cookie = '';

  it('is one clear line with the line and column, and both processes stay up', async () => {
    const line = coreOut.split('\n').find((l) => l.startsWith('carapace: CONFIG_INVALID'));
    expect(line).toContain('carapace.json line 4, column 5: not valid JSON: expected a comma');
    await sleep(1500);
    expect(core.exitCode).toBeNull();
    expect(host.exitCode).toBeNull();
    // The host reads no file: it waits for the core, which hands it nothing in safe mode.
    expect(hostOut).toContain('no plugin runs until it is fixed');
    // No plugin was loaded: the host never opened the web chat's panel socket.
    expect(existsSync(join(dir, 'run', 'panels', 'webchat.sock'))).toBe(false);
  });

  it('/health is 503 and /doctor (make doctor) says where and how to fix it', async () => {
    const health = await bearer('/health');
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'config_invalid', code: 'CONFIG_INVALID', problem: { line: 4, column: 5 } });
    expect((await fetch(`${base}/health`)).status).toBe(401);
    const doctor = (await (await bearer('/doctor')).json()) as { ok: boolean; checks: { status: string; detail: string; fix: string }[] };
    expect(doctor.ok).toBe(false);
    expect(doctor.checks[0].detail).toContain('line 4, column 5: not valid JSON: expected a comma');
    expect(doctor.checks[0].fix).toContain('line 4, column 5');
  });

  it('the console: login works, the Overview says what is wrong, everything else refuses clearly', async () => {
    const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
    expect(login.status).toBe(204);
    cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
    const overview = (await (await fetch(`${base}/api/overview`, { headers: { cookie } })).json()) as { safe_mode: { line: number; column: number; message: string } };
    expect(overview.safe_mode).toMatchObject({ line: 4, column: 5, message: 'not valid JSON: expected a comma (between two entries)' });
    const agents = await fetch(`${base}/api/agents`, { headers: { cookie } });
    expect(agents.status).toBe(503);
    expect(await agents.json()).toMatchObject({ code: 'CONFIG_INVALID' });
    // Still nothing without a session.
    expect((await fetch(`${base}/api/overview`)).status).toBe(401);
  });

  it('in a browser: the Overview and the Checks page show the file, line and column', async () => {
    mkdirSync(SHOTS, { recursive: true });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1100, height: 600 });
      await page.goto(`${base}/`);
      await logIn(page, TOKEN, '#safe-mode');
      expect(await page.$eval('#safe-mode', (e) => e.textContent)).toContain('line 4, column 5');
      await page.screenshot({ path: join(SHOTS, 'safe-mode.png') as `${string}.png` });
      await page.goto(`${base}/#/checks`);
      await page.waitForFunction(() => document.querySelector('.check[data-status="fail"]')?.textContent?.includes('line 4, column 5'));
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('fixing the file brings the core and the plugins back without a restart; the login is still good', async () => {
    writeFileSync(join(dir, 'config', 'carapace.json'), FIXED);
    await until(() => coreOut.includes('"msg":"core started"'), 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\nthe core said:\n${coreOut.slice(-3000)}`);
    });
    const up = await eventually(async () => {
      const h = (await (await bearer('/health')).json()) as { status: string; plugins?: { healthy: string[] } };
      return h.plugins?.healthy?.includes('webchat') ? h : undefined;
    }, 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\nplugin host said:\n${hostOut.slice(-3000)}`);
    });
    expect(up.status).toBe('ok');
    const overview = (await (await fetch(`${base}/api/overview`, { headers: { cookie } })).json()) as Record<string, unknown>;
    expect(overview.safe_mode).toBeUndefined();
    expect(overview.plugin_host).toBe(true);
    expect(core.exitCode).toBeNull();
  }, 70_000);
});
