// Plugin host lifecycle: crashes, restarts, start-up conflicts and the shutdown sequence.
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES, ROOT, Stack, sleep, until } from '../harness.js';
import { StartupError } from '../../src/protocol/errors.js';

describe('plugin host failure', () => {
  it('a killed plugin host costs callers RESULT_UNKNOWN (in flight) or PLUGIN_UNAVAILABLE, never the core; a restarted host serves again', async () => {
    const stack = await Stack.start({ plugins: ['echo', 'slowstop'] });
    try {
      const session = await stack.openSession('family');
      const inFlight = stack.ipc(session, 'tool.invoke.hold', { ms: 5000 });
      await sleep(200);
      await stack.killHost();
      const held = await inFlight;
      // The handler had it: it may have acted, so the caller must not simply retry.
      expect(held.err).toMatchObject({ code: 'RESULT_UNKNOWN', stage: 6, retriable: false });

      const during = await stack.ipc(session, 'tool.invoke.echo', { text: 'x' });
      expect(during.err).toMatchObject({ code: 'PLUGIN_UNAVAILABLE', stage: 6 });
      const info = await stack.ipc(session, 'tool.invoke.get_session_info', {});
      expect(info.code).toBe(0);

      stack.startHost();
      await until(() => stack.core.catalog.state('echo') === 'healthy', 10000);
      const after = await stack.ipc(session, 'tool.invoke.echo', { text: 'back' });
      expect(after.out.echoed.text).toBe('back');
    } finally {
      await stack.stop();
    }
  });

  it('the core boots and serves intrinsics when every plugin fails', async () => {
    const stack = await Stack.start({ plugins: ['netfail', 'crashinit', 'badconfig'] });
    try {
      const session = await stack.openSession('main');
      const info = await stack.ipc(session, 'tool.invoke.get_session_info', {});
      expect(info.out.plugins.healthy).toEqual([]);
      expect(info.out.plugins.failed).toHaveLength(3);
      const tools = await stack.ipc(session, 'tool.invoke.list_tools', {});
      expect(tools.out.tools.map((t: { name: string }) => t.name).sort()).toEqual(['get_diagnostics', 'get_session_info', 'list_tools', 'propose_write']);
    } finally {
      await stack.stop();
    }
  });
});

describe('start-up conflicts', () => {
  it('two plugins declaring one tool stop start-up, naming both', async () => {
    const attempt = Stack.start({ plugins: ['echo'], extraPluginDirs: { 'echo-copy': join(FIXTURES, 'echo') } });
    await expect(attempt).rejects.toThrow(StartupError);
    await expect(attempt).rejects.toThrow(/"echo".*"echo-copy"|"echo-copy".*"echo"/);
  });
});

describe('shutdown sequence', () => {
  it('drains in-flight requests, refuses new ones, forces a hung shutdown and records each outcome', async () => {
    const stack = await Stack.start({ plugins: ['echo', 'slowstop'], config: { shutdown_timeout_ms: 300 } });
    const session = await stack.openSession('family');
    const held = stack.ipc(session, 'tool.invoke.hold', { ms: 700 });
    await sleep(150);
    const stopping = stack.core.stop();
    const refused = await stack.ipc(session, 'tool.invoke.echo', { text: 'late' });
    expect(refused.err).toMatchObject({ code: 'PLUGIN_UNAVAILABLE', stage: 6 });
    const finished = await held;
    expect(finished.code).toBe(0);
    expect(finished.out).toEqual({ held: 700 });
    await stopping;
    const entries = await stack.auditEntries();
    const outcome = (plugin: string) => entries.find((e) => e.stage === 'plugin' && e.source === plugin && e.reason?.startsWith('shutdown'))?.reason;
    expect(outcome('echo')).toBe('shutdown clean');
    expect(outcome('slowstop')).toBe('shutdown timeout-forced');
    const drained = entries.filter((e) => e.stage === 'response' && e.topic === 'tool.invoke.echo' && e.code === 'PLUGIN_UNAVAILABLE');
    expect(drained.length).toBe(1);
    await until(() => stack.host?.exitCode !== null || stack.host?.signalCode !== null, 5000);
    await stack.stop();
  });
});

describe('the core process', () => {
  /**
   * Runs the core until it exits. `config`, if given, is written to carapace.json in the
   * temporary folder, with CARAPACE_CONFIG pointing at it and CARAPACE_PLUGINS_DIR at a
   * missing folder there (no plugins).
   */
  const run = (env: Record<string, string>, config?: Record<string, unknown>) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const dir = mkdtempSync(join(tmpdir(), 'cp-main-'));
      const file = join(dir, 'carapace.json');
      if (config) writeFileSync(file, JSON.stringify(config));
      const withConfig = config ? { CARAPACE_CONFIG: file, CARAPACE_PLUGINS_DIR: join(dir, 'none') } : {};
      const child = spawn(process.execPath, [join(ROOT, 'dist/core/src/main.js')], {
        env: { PATH: process.env.PATH, ANTHROPIC_API_KEY: 'sk-ant-test-key-0000000000', CARAPACE_RUN_DIR: join(dir, 'run'), CARAPACE_LOG_DIR: join(dir, 'logs'), CARAPACE_DATA_DIR: join(dir, 'data'), CARAPACE_ADMIN_PORT: '0', ...withConfig, ...env },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => {
        rmSync(dir, { recursive: true, force: true });
        resolve({ code, stderr });
      });
    });

  it('without a model credential says which variable to set, and stays up for the console to say it too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-nokey-'));
    const child = spawn(process.execPath, [join(ROOT, 'dist/core/src/main.js')], {
      env: { PATH: process.env.PATH, ANTHROPIC_API_KEY: '', CARAPACE_RUN_DIR: join(dir, 'run'), CARAPACE_LOG_DIR: join(dir, 'logs'), CARAPACE_DATA_DIR: join(dir, 'data'), CARAPACE_CONFIG: join(dir, 'config', 'carapace.json'), CARAPACE_PLUGINS_DIR: join(dir, 'none'), CARAPACE_ADMIN_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    await until(() => out.includes('"msg":"core started"'), 15_000);
    expect(out).toContain('carapace: CONFIG_INVALID: no model credential: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN in .env');
    // First start with nothing but .env: a default carapace.json and an admin token were made.
    expect(JSON.parse(readFileSync(join(dir, 'config', 'carapace.json'), 'utf8'))).toMatchObject({ groups: { main: {} } });
    expect(statSync(join(dir, 'data', 'admin-token')).mode & 0o777).toBe(0o600);
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses conflicting plugins with one clear line naming both', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-dup-'));
    mkdirSync(join(dir, 'plugins'));
    symlinkSync(join(FIXTURES, 'echo'), join(dir, 'plugins', 'first'));
    symlinkSync(join(FIXTURES, 'echo'), join(dir, 'plugins', 'second'));
    const r = await run({ CARAPACE_PLUGINS_DIR: join(dir, 'plugins'), CARAPACE_CONFIG: join(dir, 'missing.json') });
    rmSync(dir, { recursive: true, force: true });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('carapace: DUPLICATE_TOOL: Tool "echo" is declared by both plugin "first" and plugin "second"');
  });
});
