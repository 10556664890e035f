// The appliance as a user starts it: `docker compose up -d` with compose.yaml, then
// health, privileges and credential placement checked from outside.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT, sleep } from '../harness.js';

const PROJECT = `carapace-ci-${process.pid}`;
const MODEL_KEY = 'sk-ant-api03-compose-test-key-abcdef0123456789';
let volumes: string;
let port: number;

function compose(args: string[], env: NodeJS.ProcessEnv = {}): string {
  const [cmd, pre] = existsSync('/usr/bin/docker-compose') ? ['docker-compose', []] : ['docker', ['compose']];
  return execFileSync(cmd, [...pre, '-p', PROJECT, '-f', join(ROOT, 'compose.yaml'), ...args], {
    cwd: ROOT,
    env: { ...process.env, CARAPACE_INSTANCE: PROJECT, CARAPACE_VOLUMES: volumes, CARAPACE_ADMIN_PORT: String(port), ANTHROPIC_API_KEY: MODEL_KEY, TELEGRAM_BOT_TOKEN: '', ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

beforeAll(async () => {
  volumes = mkdtempSync(join(tmpdir(), 'cp-compose-'));
  for (const d of ['config', 'data', 'logs', 'groups']) mkdirSync(join(volumes, d));
  writeFileSync(join(volumes, 'config', 'carapace.json'), JSON.stringify({ groups: { main: {} } }));
  port = await freePort();
  compose(['up', '-d']);
}, 300_000);

afterAll(() => {
  try {
    compose(['down', '-v', '--timeout', '5']);
  } finally {
    rmSync(volumes, { recursive: true, force: true });
  }
}, 120_000);

async function health(): Promise<{ status: string; plugins: { healthy: string[]; failed: { name: string; category: string }[] } } | null> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) });
    return r.ok ? ((await r.json()) as never) : null;
  } catch {
    return null;
  }
}

describe('docker compose up -d', () => {
  it('starts the core and the plugin host, which report plugin health', async () => {
    let h = await health();
    for (let i = 0; i < 120 && !(h && h.plugins.failed.some((f) => f.name === 'telegram')); i++) {
      await sleep(500);
      h = await health();
    }
    if (!h) console.error(compose(['logs', '--tail', '50']));
    expect(h?.status).toBe('ok');
    // No bot token configured: the Telegram plugin fails cleanly, the core stays up.
    expect(h?.plugins.failed).toEqual(expect.arrayContaining([{ name: 'telegram', category: 'CONFIG_ERROR' }]));
  }, 120_000);

  it('runs both services unprivileged, and the model key only in the core', () => {
    // The uid of the node process itself (exec would run as the image's configured user).
    const uidOf = (service: string) =>
      compose(['exec', '-T', service, 'sh', '-c', `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^node dist/core' && awk '/^Uid/{print $2}' $p/status; done`]).trim();
    expect(uidOf('core')).toBe('1000');
    expect(uidOf('plugins')).toBe('1000');
    const pluginsEnv = compose(['exec', '-T', 'plugins', 'env']);
    expect(pluginsEnv).not.toContain(MODEL_KEY);
    expect(compose(['exec', '-T', 'core', 'env'])).toContain(MODEL_KEY);
  });

  it('writes the audit log to the logs volume', () => {
    const log = compose(['exec', '-T', 'core', 'cat', '/app/volumes/logs/audit.jsonl']);
    expect(log).toContain('"reason":"core 0.1.0 started"');
    expect(log).not.toContain(MODEL_KEY);
  });
});
