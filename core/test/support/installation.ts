// An earlier release's volumes (core/test/fixtures/upgrade/<date>, written by that release's
// own stores) under today's core and plugin host: real processes, as `docker compose up -d
// --build` after a `git pull` starts them. For the upgrade tests.
import { expect } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, freePort, HOST_MAIN, pluginUidRange, ROOT, until } from '../harness.js';

export type AuditEntry = { reason?: string; source: string; timestamp: string; group?: string | null };

function start(file: string, vars: Record<string, string>, onOutput: (text: string) => void): ChildProcess {
  const child = spawn(process.execPath, [file], { env: { PATH: process.env.PATH, ...vars }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => onOutput(d.toString()));
  child.stderr!.on('data', (d: Buffer) => onOutput(d.toString()));
  return child;
}

export class Installation {
  readonly fixture: string;
  private running: { core: ChildProcess; host: ChildProcess; out: { core: string; host: string } } | null = null;
  private cookie = '';

  private constructor(release: string, readonly dir: string, readonly base: string, private readonly env: Record<string, string>) {
    this.fixture = join(ROOT, 'core/test/fixtures/upgrade', release);
  }

  /** A copy of the `release` fixture, today's code started on it. */
  static async upgrade(release: string): Promise<Installation> {
    const dir = mkdtempSync(join(tmpdir(), 'cp-upgrade-'));
    chmodSync(dir, 0o711); // plugins run as uids of their own when the tests run as root
    const installation = new Installation(release, dir, `http://127.0.0.1:${await freePort()}`, {
      CARAPACE_RUN_DIR: join(dir, 'run'),
      CARAPACE_CONFIG: join(dir, 'config', 'carapace.json'),
      CARAPACE_PLUGINS_DIR: join(ROOT, 'plugins'),
      CARAPACE_HANDLERS_DIR: join(ROOT, 'dist/plugins'),
      CARAPACE_DATA_DIR: join(dir, 'data'),
      CARAPACE_PLUGIN_FIRST_UID: String(pluginUidRange()),
    });
    cpSync(installation.fixture, dir, { recursive: true });
    mkdirSync(join(dir, 'run'));
    await installation.up();
    return installation;
  }

  /** What the plugin host said (for a failure's message). */
  get hostOutput(): string {
    return this.running?.out.host.slice(-3000) ?? '';
  }

  async up(): Promise<void> {
    const out = { core: '', host: '' };
    const core = start(join(ROOT, 'dist/core/src/main.js'), { ...this.env, CARAPACE_LOG_DIR: join(this.dir, 'logs'), CARAPACE_ADMIN_PORT: String(new URL(this.base).port), ANTHROPIC_API_KEY: 'sk-ant-test-key-0000000000' }, (t) => (out.core += t));
    const host = start(HOST_MAIN, this.env, (t) => (out.host += t));
    this.running = { core, host, out };
    await until(() => out.core.includes('"msg":"core started"'), 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\nthe core said:\n${out.core.slice(-3000)}`);
    });
  }

  async down(): Promise<void> {
    if (!this.running) return;
    for (const child of [this.running.host, this.running.core]) {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
    }
    this.running = null;
  }

  async remove(): Promise<void> {
    await this.down();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Logs in with the token in the volumes (the one the release made); the status. */
  async logIn(): Promise<number> {
    const token = readFileSync(join(this.dir, 'data', 'admin-token'), 'utf8').trim();
    const login = await fetch(`${this.base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    this.cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
    return login.status;
  }

  /** GET as the logged-in person: the status and the body. */
  async fetch<T>(path: string): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.base}${path}`, { headers: { cookie: this.cookie } });
    return { status: res.status, body: (await res.json().catch(() => null)) as T };
  }

  /** GET that must answer 200. */
  async api<T>(path: string): Promise<T> {
    const { status, body } = await this.fetch<T>(path);
    expect(status).toBe(200);
    return body;
  }

  /** A plugin's page API, once the plugin has started (its stores opened). */
  panel<T>(plugin: string, path: string): Promise<T> {
    return eventually(async () => {
      const { status, body } = await this.fetch<T>(`/plugins/${plugin}/api/${path}`);
      return status === 200 ? body : undefined;
    }, 30_000);
  }

  async activity(): Promise<AuditEntry[]> {
    return (await this.api<{ entries: AuditEntry[] }>('/api/audit?limit=1000')).entries;
  }
}
