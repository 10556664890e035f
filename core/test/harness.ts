// Test harness: a real core in this process, a real plugin host process, the real ipc
// binary. Each stack gets its own temporary directory for sockets, logs and data.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../src/config.js';
import { Core } from '../src/core.js';
import { canonicalJson } from '../src/plugins/plugin-settings.js';
import type { AuditEntry } from '../src/audit/audit-log.js';
import type { Session } from '../src/boundary/session-table.js';
import type { PendingConfirmation } from '../src/confirm/confirmations.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const IPC_BIN = process.env.CARAPACE_IPC_BIN ?? join(ROOT, 'dist/bin/ipc');
export const FIXTURES = join(ROOT, 'core/test/fixtures/plugins');
export const FIXTURE_HANDLERS = join(ROOT, 'dist/core/test/fixtures/plugins');
export const HOST_MAIN = join(ROOT, 'dist/core/plugin-host/main.js');

export const FAULTY_TOKEN = 'faulty-secret-token-5f2c9a7e';

/**
 * carapace.json's `sessions`, raised out of the way, for suites that flood a session on
 * purpose to test what comes after the session guard (which would quarantine them).
 */
export const UNGUARDED_SESSIONS = { requests_per_minute: 1_000_000, burst: 100_000, bytes_per_minute: 1e12, burst_bytes: 1e11, max_in_flight: 1024, refusals_per_minute: 100_000 };

export interface IpcResult {
  code: number;
  stdout: string;
  stderr: string;
  out: any;
  err: any;
}

export interface StackOptions {
  plugins: string[];
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Plugin folders to place as given (name → source folder), e.g. for startup-conflict tests. */
  extraPluginDirs?: Record<string, string>;
  /**
   * An installation's volumes folder, laid out as the appliance's (config/carapace.json,
   * data/, logs/, groups/), which outlives the stack: the core keeps standing approvals and
   * event keys there as main.ts does. Without `config`, an existing carapace.json is used.
   */
  volumes?: string;
}

/** The first uid of a range of 100 for one plugin host's plugins (CARAPACE_PLUGIN_FIRST_UID): its own, since each plugin's uid is swept whole when it ends. */
export function pluginUidRange(): number {
  return 100_000 + randomInt(0, 100_000) * 100;
}

export class Stack {
  core!: Core;
  host: ChildProcess | null = null;
  hostOutput = '';
  /** The host's output once it holds `pattern`: its log comes through a pipe, often after the answer that caused it. */
  async hostSaid(pattern: RegExp | string, timeoutMs = 5000): Promise<string> {
    const holds = (): boolean => (typeof pattern === 'string' ? this.hostOutput.includes(pattern) : pattern.test(this.hostOutput));
    await until(holds, timeoutMs).catch(() => undefined);
    return this.hostOutput;
  }
  readonly dir = mkdtempSync(join(tmpdir(), 'cp-'));
  readonly runDir = join(this.dir, 'run');
  readonly pluginsDir = join(this.dir, 'plugins');
  /** The first of this stack's plugin uids (as root): a range of its own, since a plugin's uid is swept whole. */
  readonly firstUid = pluginUidRange();
  private rawConfig: Record<string, unknown>;

  constructor(private readonly options: StackOptions) {
    // Plugins run as uids of their own when the tests run as root: they must be able to
    // pass through to their data folders (not list or read what else is here).
    chmodSync(this.dir, 0o711);
    mkdirSync(this.pluginsDir, { recursive: true });
    mkdirSync(this.runDir, { recursive: true });
    for (const name of options.plugins) symlinkSync(join(FIXTURES, name), join(this.pluginsDir, name));
    for (const [name, src] of Object.entries(options.extraPluginDirs ?? {})) symlinkSync(src, join(this.pluginsDir, name));
    if (options.volumes) mkdirSync(dirname(this.configFile), { recursive: true });
    if (options.volumes && !options.config && existsSync(this.configFile)) {
      this.rawConfig = JSON.parse(readFileSync(this.configFile, 'utf8')) as Record<string, unknown>;
    } else {
      this.rawConfig = options.config ?? {};
      writeFileSync(this.configFile, JSON.stringify(this.rawConfig));
    }
  }

  /** Where the core and the plugins keep their state (the volumes' data/, else the stack's own). */
  get dataDir(): string {
    return join(this.options.volumes ?? this.dir, 'data');
  }

  get auditFile(): string {
    return join(this.options.volumes ?? this.dir, 'logs', 'audit.jsonl');
  }

  get configFile(): string {
    return this.options.volumes ? join(this.options.volumes, 'config', 'carapace.json') : join(this.dir, 'carapace.json');
  }

  static async start(options: StackOptions): Promise<Stack> {
    const stack = new Stack(options);
    stack.core = await Core.start({
      runDir: stack.runDir,
      pluginsDir: stack.pluginsDir,
      auditFile: stack.auditFile,
      skillsDir: join(stack.dataDir, 'skills'),
      documentsDir: join(stack.dataDir, 'documents'),
      config: parseConfig(stack.rawConfig),
      configFile: stack.configFile,
      heldEventsFile: join(stack.dataDir, 'held-events.sqlite'),
      ...(options.volumes ? { standingApprovalsFile: join(stack.dataDir, 'standing-approvals.json'), eventKeysFile: join(stack.dataDir, 'event-keys.sqlite') } : {}),
    });
    stack.startHost();
    await stack.waitSettled();
    return stack;
  }

  /**
   * Writes carapace.json and waits until the core has taken it (it watches the file): its
   * groups and plugin sections are those written. The plugin host gets them from the core.
   */
  async writeConfig(raw: Record<string, unknown>, timeoutMs = 10_000): Promise<void> {
    writeFileSync(this.configFile, JSON.stringify(raw, null, 2));
    const want = canonicalJson({ groups: Object.keys((raw.groups as object | undefined) ?? {}).sort(), plugins: raw.plugins ?? {} });
    await until(() => canonicalJson({ groups: Object.keys(this.core.config.groups).sort(), plugins: this.core.config.plugins }) === want, timeoutMs);
  }

  startHost(): void {
    const host = spawn(process.execPath, [HOST_MAIN], {
      env: {
        PATH: process.env.PATH,
        CARAPACE_RUN_DIR: this.runDir,
        CARAPACE_PLUGINS_DIR: this.pluginsDir,
        CARAPACE_HANDLERS_DIR: `${FIXTURE_HANDLERS}:${join(ROOT, 'dist/plugins')}`,
        CARAPACE_DATA_DIR: this.dataDir,
        FAULTY_TOKEN,
        CARAPACE_PLUGIN_FIRST_UID: String(this.firstUid),
        ...this.options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    host.stdout?.on('data', (d: Buffer) => (this.hostOutput += d.toString()));
    host.stderr?.on('data', (d: Buffer) => (this.hostOutput += d.toString()));
    this.host = host;
  }

  /** Waits until no plugin is still starting. */
  async waitSettled(timeoutMs = 15000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const names = this.core.catalog.pluginNames();
    while (names.some((n) => this.core.catalog.state(n) === 'starting')) {
      if (Date.now() > deadline) throw new Error(`plugins did not settle: ${names.map((n) => `${n}=${this.core.catalog.state(n)}`).join(' ')}\n${this.hostOutput}`);
      await sleep(20);
    }
  }

  async killHost(): Promise<void> {
    const host = this.host;
    if (!host || host.exitCode !== null) return;
    const exited = new Promise((r) => host.once('exit', r));
    host.kill('SIGKILL');
    await exited;
  }

  openSession(group: string): Promise<Session> {
    return this.core.openSession(group);
  }

  ipc(session: Session, topic: string, args: unknown, opts: { stdin?: boolean; timeoutMs?: number } = {}): Promise<IpcResult> {
    const text = typeof args === 'string' ? args : JSON.stringify(args);
    return new Promise((resolveResult) => {
      const child = execFile(
        IPC_BIN,
        [topic, opts.stdin ? '-' : text],
        {
          env: { CARAPACE_IPC_ENDPOINT: `ipc://${session.socketPath}`, CARAPACE_IPC_TIMEOUT_MS: String(opts.timeoutMs ?? 10000) },
          maxBuffer: 16 * 1024 * 1024,
        },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
          resolveResult({ code, stdout, stderr, out: tryParse(stdout), err: tryParse(stderr) });
        },
      );
      if (opts.stdin) child.stdin?.end(text);
    });
  }

  /** Waits until a confirmation in `group` that `matches` is pending. */
  pendingConfirmation(group: string, matches: (p: PendingConfirmation) => boolean): Promise<PendingConfirmation> {
    return until(() => this.core.confirmations.list(group).find(matches), 10_000);
  }

  /** Waits until a confirmation in `group` that `matches` is pending, then answers it as a person would. */
  async answerConfirmation(group: string, matches: (p: PendingConfirmation) => boolean, approve = true): Promise<PendingConfirmation> {
    const pending = await this.pendingConfirmation(group, matches);
    this.core.confirmations.resolve(pending.id, approve, 'test');
    return pending;
  }

  /** The audit file once every entry recorded so far has reached it. */
  async auditText(): Promise<string> {
    const read = () => (existsSync(this.auditFile) ? readFileSync(this.auditFile, 'utf8') : '');
    await this.core.audit.flush();
    await until(() => read().split('\n').length - 1 >= this.core.audit.recorded, 10000);
    return read();
  }

  async auditEntries(): Promise<AuditEntry[]> {
    return (await this.auditText()).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEntry);
  }

  async stop(): Promise<void> {
    await this.core.stop();
    const host = this.host;
    if (host && host.exitCode === null && host.signalCode === null) {
      const exited = new Promise((r) => host.once('exit', r));
      const timer = setTimeout(() => host.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function tryParse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A TCP port on loopback that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Polls an async probe (a throw counts as "not yet") until it gives something. */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(50);
  }
}

export async function until<T>(probe: () => T | undefined | null | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}
