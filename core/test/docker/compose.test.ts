// The appliance as a user starts it: `docker compose up -d` with compose.yaml, then
// health, privileges and credential placement checked from outside.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../harness.js';
import { ComposeProject } from '../support/compose.js';

const MODEL_KEY = 'sk-ant-api03-compose-test-key-abcdef0123456789';
let project: ComposeProject;

const compose = (args: string[]): string => project.run(args);

beforeAll(async () => {
  project = await ComposeProject.create({
    name: `carapace-ci-${process.pid}`,
    file: join(ROOT, 'compose.yaml'),
    config: { groups: { main: {} } },
    env: { ANTHROPIC_API_KEY: MODEL_KEY, TELEGRAM_BOT_TOKEN: '' },
  });
  // A person's own plugin in TypeScript: no build, no image rebuild.
  cpSync(join(ROOT, 'core/test/fixtures/drop-ins/stamp'), join(project.volumes, 'plugins', 'stamp'), { recursive: true });
  compose(['up', '-d']);
}, 300_000);

afterAll(() => {
  if (!project) return;
  try {
    project.down();
  } finally {
    project.removeVolumes();
  }
}, 120_000);

describe('docker compose up -d', () => {
  it('starts the core and the plugin host, which report plugin health', async () => {
    // Plugins start once the core is there: wait for the drop-in too, not only the first verdicts.
    const h = await project.waitForHealth((health) => health.plugins.failed.some((f) => f.name === 'telegram') && health.plugins.healthy.includes('stamp'));
    if (!h) console.error(compose(['logs', '--tail', '50']));
    expect(h?.status).toBe('ok');
    // No bot token configured: the Telegram plugin is only "not configured", the core stays up.
    expect(h?.plugins.failed).toEqual(expect.arrayContaining([{ name: 'telegram', category: 'NOT_CONFIGURED' }]));
    // The drop-in's handler.ts ran as it is (its initialize() answered).
    expect(h?.plugins.healthy).toContain('stamp');
  }, 120_000);

  it('runs the core unprivileged, each plugin as a uid of its own, and the model key only in the core', () => {
    // The uid of the node process itself (exec would run as the image's configured user).
    const uidOf = (service: string) =>
      compose(['exec', '-T', service, 'sh', '-c', `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^node dist/core' && awk '/^Uid/{print $2}' $p/status; done; true`]).trim();
    expect(uidOf('core')).toBe('1000');
    // The plugin host supervises as root (with six capabilities: compose.yaml); no plugin code runs in it.
    expect(uidOf('plugins')).toBe('0');
    const pluginUids = compose(['exec', '-T', 'plugins', 'sh', '-c', `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'runner/[m]ain.js' && awk '/^Uid/{print $2}' $p/status; done; true`]).trim().split('\n');
    expect(pluginUids.length).toBeGreaterThanOrEqual(3); // memory, tasks, webchat
    for (const uid of pluginUids) expect(Number(uid)).toBeGreaterThanOrEqual(20_001);
    expect(uidOf('egress')).toBe('1000');
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
