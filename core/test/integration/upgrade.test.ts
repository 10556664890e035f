// Upgrading keeps everything (DESIGN 18): today's core and plugin host, real processes, on
// the volumes the 2026-11-24 release left (core/test/fixtures/upgrade/2026-11-24, written by
// that release's own stores: make-fixture.mjs). Everything a person could see before is seen
// after; every older file is migrated once and Activity says so; a second start migrates
// nothing; the console's login is the same.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, freePort, HOST_MAIN, pluginUidRange, ROOT, until } from '../harness.js';

const FIXTURE = join(ROOT, 'core/test/fixtures/upgrade/2026-11-24');

let dir: string;
let base = '';
let env: Record<string, string>;
let running: { core: ChildProcess; host: ChildProcess; out: { core: string; host: string } } | null = null;
let cookie = '';

function start(file: string, vars: Record<string, string>, onOutput: (text: string) => void): ChildProcess {
  const child = spawn(process.execPath, [file], { env: { PATH: process.env.PATH, ...vars }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => onOutput(d.toString()));
  child.stderr!.on('data', (d: Buffer) => onOutput(d.toString()));
  return child;
}

async function up(): Promise<void> {
  const out = { core: '', host: '' };
  const core = start(join(ROOT, 'dist/core/src/main.js'), { ...env, CARAPACE_LOG_DIR: join(dir, 'logs'), CARAPACE_ADMIN_PORT: String(new URL(base).port), ANTHROPIC_API_KEY: 'sk-ant-test-key-0000000000' }, (t) => (out.core += t));
  const host = start(HOST_MAIN, env, (t) => (out.host += t));
  running = { core, host, out };
  await until(() => out.core.includes('"msg":"core started"'), 30_000).catch((err: unknown) => {
    throw new Error(`${String(err)}\nthe core said:\n${out.core.slice(-3000)}`);
  });
}

async function down(): Promise<void> {
  if (!running) return;
  for (const child of [running.host, running.core]) {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  }
  running = null;
}

const api = async <T>(path: string): Promise<T> => {
  const res = await fetch(`${base}${path}`, { headers: { cookie } });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
};
type Entry = { reason?: string; source: string; timestamp: string };
const activity = (): Promise<{ entries: Entry[] }> => api('/api/audit?n=5000');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-upgrade-'));
  chmodSync(dir, 0o711); // plugins run as uids of their own when the tests run as root
  cpSync(FIXTURE, dir, { recursive: true });
  mkdirSync(join(dir, 'run'));
  env = {
    CARAPACE_RUN_DIR: join(dir, 'run'),
    CARAPACE_CONFIG: join(dir, 'config', 'carapace.json'),
    CARAPACE_PLUGINS_DIR: join(ROOT, 'plugins'),
    CARAPACE_HANDLERS_DIR: join(ROOT, 'dist/plugins'),
    CARAPACE_DATA_DIR: join(dir, 'data'),
    CARAPACE_PLUGIN_FIRST_UID: String(pluginUidRange()),
  };
  base = `http://127.0.0.1:${await freePort()}`;
  await up();
}, 60_000);

afterAll(async () => {
  await down();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('an installation of the 2026-11-24 release, upgraded', () => {
  it('logs in with the token it had', async () => {
    const token = readFileSync(join(FIXTURE, 'data', 'admin-token'), 'utf8').trim();
    const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    expect(login.status).toBe(204);
    cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
  });

  it('shows the Activity from before the upgrade', async () => {
    const reasons = (await activity()).entries.map((e) => e.reason);
    expect(reasons).toContain('core started (the 2026-11-24 release)');
    expect(reasons).toContain('stored a memory before the upgrade');
  });

  it('migrated every older file once, and Activity says which', async () => {
    let migrated: string[] = [];
    const said = await eventually(async () => {
      migrated = (await activity()).entries.filter((e) => e.reason?.includes('migrated from format version')).map((e) => e.reason!);
      // The plugins' files are migrated as each plugin starts (Telegram, with no bot token here, does not).
      return migrated.length >= 4 ? migrated : undefined;
    }, 20_000).catch((err: unknown) => {
      throw new Error(`${String(err)}: Activity said ${JSON.stringify(migrated)}; the host said:\n${running?.out.host.slice(-3000)}`);
    });
    for (const file of ['llm/usage.sqlite migrated from format version 0 to 1', 'unfinished-turns.sqlite migrated from format version 0 to 1', 'webchat/history.json migrated from format version 0 to 1', 'memory/main.sqlite migrated from format version 2 to 3']) {
      expect(said.some((reason) => reason.includes(file))).toBe(true);
    }
    // Written in today's format: read by today's code from now on.
    expect(JSON.parse(readFileSync(join(dir, 'data/plugins/webchat/history.json'), 'utf8'))).toMatchObject({ version: 1, groups: { main: [{ text: 'Remember that the boat trip is on Saturday' }, { from: 'agent' }] } });
  });

  it('keeps the usage, its cost said as never recorded rather than $0.00', () => {
    const db = new Database(join(dir, 'data/llm/usage.sqlite'), { readonly: true });
    try {
      expect(db.prepare("SELECT day, input_tokens, output_tokens, cost_micros, unpriced_tokens, requests FROM usage WHERE day < '2026-11-25' ORDER BY day").all()).toEqual([
        { day: '2026-11-22', input_tokens: 12000, output_tokens: 800, cost_micros: 0, unpriced_tokens: 12800, requests: 1 },
        { day: '2026-11-24', input_tokens: 30000, output_tokens: 2100, cost_micros: 0, unpriced_tokens: 32100, requests: 1 },
      ]);
    } finally {
      db.close();
    }
  });

  it('keeps the chat, the memory, the task, the standing approval and the paired chat', async () => {
    const chat = await eventually(async () => {
      const res = await fetch(`${base}/plugins/webchat/api/history?group=main`, { headers: { cookie } });
      return res.status === 200 ? ((await res.json()) as { messages: { text: string }[] }) : undefined;
    }, 30_000);
    expect(chat.messages.map((m) => m.text)).toEqual(['Remember that the boat trip is on Saturday', 'Noted: the boat trip is on Saturday.']);
    const memory = await eventually(async () => {
      const res = await fetch(`${base}/plugins/memory/api/search?group=main&q=boat`, { headers: { cookie } });
      return res.status === 200 ? ((await res.json()) as { results: { content: string }[] }) : undefined;
    }, 30_000);
    expect(memory.results.map((r) => r.content)).toEqual(['The boat trip is on Saturday at the marina']);
    const tasks = await eventually(async () => {
      const res = await fetch(`${base}/plugins/tasks/api/tasks?group=main`, { headers: { cookie } });
      return res.status === 200 ? ((await res.json()) as { tasks: { task_id: string }[] }) : undefined;
    }, 30_000);
    expect(tasks.tasks.map((t) => t.task_id)).toEqual(['morning-brief']);
    const { standing } = await api<{ standing: { tool: string; group: string }[] }>('/api/confirmations');
    expect(standing).toEqual([expect.objectContaining({ tool: 'send_telegram_message', group: 'main' })]);
    const { chats } = await api<{ chats: { plugin: string; chat: string; group: string }[] }>('/api/groups');
    expect(chats).toContainEqual(expect.objectContaining({ plugin: 'telegram', chat: '4242', group: 'main' }));
  });

  it('says since when the conversation is kept, not just "0 messages"', async () => {
    const convo = await api<{ messages: unknown[]; kept_since: string }>('/api/conversation/main');
    expect(convo.messages).toEqual([]);
    expect(Date.parse(convo.kept_since)).toBeGreaterThan(Date.parse('2026-11-25'));
  });

  it('a second start migrates nothing', async () => {
    const before = (await activity()).entries.filter((e) => e.reason?.includes('migrated from format version')).length;
    await down();
    await up();
    const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: readFileSync(join(dir, 'data', 'admin-token'), 'utf8').trim() }) });
    cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
    // Every plugin started again (its stores opened) before counting.
    await eventually(async () => ((await fetch(`${base}/plugins/memory/api/search?group=main&q=boat`, { headers: { cookie } })).status === 200 ? true : undefined), 30_000);
    await eventually(async () => ((await fetch(`${base}/plugins/webchat/api/history?group=main`, { headers: { cookie } })).status === 200 ? true : undefined), 30_000);
    const after = (await activity()).entries.filter((e) => e.reason?.includes('migrated from format version')).length;
    expect(after).toBe(before);
  }, 90_000);
});
