// A backup taken while the appliance works, restored into a fresh folder, and a new stack
// on it that carries on (issue 32 §2). Real parts throughout: the core, the plugin host
// process with the real memory, tasks and Telegram plugins (Telegram's Bot API a stand-in),
// the real ipc binary, the conversation and usage stores on their SQLite files as main.ts
// wires them, and the backup and restore CLIs as processes of their own. While the backup
// runs, memories are stored, messages arrive, usage is counted and high-risk calls are
// approved (each approval a standing one) in a loop. Every database in the archive passes
// integrity_check and every checksum matches, read with the tar package and SQLite directly;
// the restored stack finds what was there before the backup: a memory through memory_search,
// the conversation, the task, the standing approval (a call it covers runs unasked), the
// usage, the audit history and the workspace.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tar from 'tar';
import { parseConfig } from '../../src/config.js';
import { ConversationKeeper } from '../../src/conversation/conversation-keeper.js';
import { ConversationStore } from '../../src/conversation/conversation-store.js';
import { UsageStore } from '../../src/llm/usage-store.js';
import type { Session } from '../../src/boundary/session-table.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { ROOT, Stack, until } from '../harness.js';
import { expectOk } from '../support/expect-ipc.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const CLI = join(ROOT, 'dist/core/src/backup/cli.js');
const TOKEN = '123456789:AAH-backup-restore-token-0123456789';
const CHAT = 4343;
const DAY = new Date().toISOString().slice(0, 10);
const PLUGINS = { memory: join(ROOT, 'plugins/memory'), tasks: join(ROOT, 'plugins/tasks'), telegram: join(ROOT, 'plugins/telegram') };
const settings = parseConfig({}).conversation;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, CARAPACE_RUN_DIR: join(dir, 'no-run') }, maxBuffer: 8 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

let dir: string;
let tg: TelegramStandIn;
let first: Stack | null = null;
let second: Stack | null = null;
let conversation: ConversationStore;
let usage: UsageStore;
let session: Session;
/** What was there before the backup began. */
const before = { memory: '', task: '', standing: '', correlation: '' };
let archive = '';
/** What the loop did while the backup ran. */
const during = { memories: 0, messages: 0, approvals: 0 };

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

/** A high-risk call answered by a person, who also allows it for a day (a standing approval). */
async function approved(stack: Stack, s: Session, target: string): Promise<string> {
  const call = stack.ipc(s, 'tool.invoke.delete_everything', { target });
  const pending = await stack.pendingConfirmation('family', (p) => p.arguments.target === target);
  const answer = stack.core.answerConfirmation(pending.id, true, 'test', 24);
  expect((await call).out).toEqual({ deleted: target });
  return (answer.standing as { id: string }).id;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-backup-restore-'));
  chmodSync(dir, 0o711); // plugins run as uids of their own (as root): they pass through to their folders
  tg = await TelegramStandIn.start(TOKEN);
  const volumes = join(dir, 'volumes');
  first = await Stack.start({
    plugins: ['guarded'],
    extraPluginDirs: PLUGINS,
    env: { TELEGRAM_BOT_TOKEN: TOKEN },
    volumes,
    config: {
      groups: { family: {} },
      rate_limit: { per_minute: 60_000, burst: 1000 },
      plugins: { tasks: { timezone: 'UTC' }, telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'family' }, poll_timeout_s: 1 } },
    },
  });
  // Wired as main.ts wires them, on the same data folder.
  conversation = new ConversationStore(join(first.dataDir, 'conversation.sqlite'), settings);
  const keeper = new ConversationKeeper(first.core, conversation, settings, async () => undefined);
  first.core.on('event', (event) => keeper.take(event));
  usage = new UsageStore(join(first.dataDir, 'llm', 'usage.sqlite'));
  mkdirSync(join(volumes, 'groups', 'family'), { recursive: true });
  writeFileSync(join(volumes, 'groups', 'family', 'notes.txt'), 'Biscuit eats at six.\n');
  session = await first.openSession('family');
}, 60_000);

afterAll(async () => {
  conversation?.close();
  usage?.close();
  await first?.stop().catch(() => undefined);
  await second?.stop().catch(() => undefined);
  await tg?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a backup while the appliance works, restored into a fresh folder', () => {
  it('before: a memory, a conversation, a task, a standing approval, usage and audit entries', async () => {
    const stack = first!;
    const stored = expectOk(await stack.ipc(session, 'tool.invoke.memory_store', { type: 'fact', content: 'The family dog is called Biscuit' }));
    before.memory = stored.id as string;
    before.correlation = (await stack.auditEntries()).find((e) => e.topic === 'tool.invoke.memory_store' && e.stage === 'route')!.correlation!;
    tg.queueMessage({ chatId: CHAT, text: 'Remember the dentist on Friday', fromId: 42 });
    await until(() => conversation.list('family').some((m) => m.text === 'Remember the dentist on Friday'), 15_000);
    expect((await stack.ipc(session, 'tool.invoke.send_telegram', { recipient: String(CHAT), body: 'Noted: the dentist on Friday.' })).code).toBe(0);
    await until(() => conversation.list('family').some((m) => m.direction === 'out'), 5000);
    const task = expectOk(await stack.ipc(session, 'tool.invoke.schedule_task', { prompt: 'Water the plants', run_at: new Date(Date.now() + 7 * 86_400_000).toISOString() }));
    before.task = task.task_id as string;
    before.standing = await approved(stack, session, 'old-photos');
    usage.addUsage('family', DAY, { input: 1234, output: 56, micros: 789 });
  }, 60_000);

  it('the backup, taken while memories, messages, usage and approvals keep coming, holds every database sound and every checksum right', async () => {
    const stack = first!;
    let stop = false;
    let i = 0;
    const loop = (async () => {
      while (!stop) {
        i++;
        expectOk(await stack.ipc(session, 'tool.invoke.memory_store', { type: 'fact', content: `Loop fact number ${i}` }));
        during.memories++;
        tg.queueMessage({ chatId: CHAT, text: `loop message ${i}`, fromId: 42 });
        during.messages++;
        usage.addUsage('family', DAY, { input: 10, output: 1, micros: 1 });
        await approved(stack, session, `loop-${i}`);
        during.approvals++;
        appendFileSync(join(dir, 'volumes', 'groups', 'family', 'notes.txt'), `loop ${i}\n`);
      }
    })();
    await until(() => during.approvals >= 1, 20_000); // the loop is under way
    const at = { ...during };
    const made = await cli(['create', '--volumes', join(dir, 'volumes'), '--out', join(dir, 'backups')]);
    const after = { ...during };
    stop = true;
    await loop;
    expect(made.stderr).toBe('');
    expect(made.code).toBe(0);
    archive = made.stdout.trim().split('\n').at(-1)!;
    expect(archive).toMatch(/\/backups\/carapace-\d{4}-\d{2}-\d{2}-\d{6}\.tar\.gz$/);
    // Writes really went on while the backup ran.
    expect(after.memories).toBeGreaterThan(at.memories);
    expect(after.approvals).toBeGreaterThan(at.approvals);

    // Read back with the tar package and SQLite themselves, not the restore code.
    const unpacked = join(dir, 'unpacked');
    mkdirSync(unpacked);
    await tar.x({ file: archive, cwd: unpacked });
    const manifest = JSON.parse(readFileSync(join(unpacked, 'manifest.json'), 'utf8')) as { format: number; carapace_version: string; files: { path: string; size: number; sha256: string; sqlite?: { user_version: number } }[] };
    expect(manifest.format).toBe(1);
    const paths = manifest.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining([
      'config/carapace.json',
      'data/plugins/memory/family.sqlite',
      'data/plugins/tasks/tasks.json',
      'data/conversation.sqlite',
      'data/llm/usage.sqlite',
      'data/event-keys.sqlite',
      'data/standing-approvals.json',
      'logs/audit.jsonl',
      'groups/family/notes.txt',
    ]));
    expect(paths.filter((p) => /-(wal|shm|journal)$/.test(p))).toEqual([]); // each database is one consistent file
    for (const f of manifest.files) {
      expect({ path: f.path, sha256: sha256(join(unpacked, f.path)) }).toEqual({ path: f.path, sha256: f.sha256 });
    }
    const databases = manifest.files.filter((f) => f.sqlite);
    expect(databases.map((d) => d.path)).toEqual(expect.arrayContaining(['data/plugins/memory/family.sqlite', 'data/conversation.sqlite', 'data/llm/usage.sqlite', 'data/event-keys.sqlite']));
    for (const d of databases) {
      const db = new Database(join(unpacked, d.path), { readonly: true });
      expect({ path: d.path, check: db.pragma('integrity_check', { simple: true }), version: db.pragma('user_version', { simple: true }) }).toEqual({ path: d.path, check: 'ok', version: d.sqlite!.user_version });
      db.close();
    }
  }, 120_000);

  it('restored into a fresh folder, a new stack answers with what was there before the backup', async () => {
    conversation.close();
    usage.close();
    await first!.stop();
    first = null;
    const restoredTo = join(dir, 'restored');
    const r = await cli(['restore', archive, '--volumes', restoredTo, '--staging', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('databases pass integrity_check');

    // The plugins' folders are theirs again (the uids the plugin host gave them), closed to others.
    if (process.getuid?.() === 0) {
      const { uids } = JSON.parse(readFileSync(join(restoredTo, 'data', 'plugins', '.uids.json'), 'utf8')) as { uids: Record<string, number> };
      const memory = statSync(join(restoredTo, 'data', 'plugins', 'memory'));
      expect({ uid: memory.uid, mode: memory.mode & 0o777 }).toEqual({ uid: uids.memory, mode: 0o700 });
      expect(statSync(join(restoredTo, 'data', 'plugins', 'memory', 'family.sqlite')).uid).toBe(uids.memory);
      expect(statSync(join(restoredTo, 'data', 'conversation.sqlite')).uid).toBe(1000); // the core's user in the image
    }
    second = await Stack.start({ plugins: ['guarded'], extraPluginDirs: PLUGINS, env: { TELEGRAM_BOT_TOKEN: TOKEN }, volumes: restoredTo });
    expect(second.core.catalog.state('memory')).toBe('healthy');
    const s = await second.openSession('family');
    // Memories, through the real pipeline.
    const found = expectOk(await second.ipc(s, 'tool.invoke.memory_search', { query: 'Biscuit' }));
    expect(found.results.map((e: { id: string }) => e.id)).toContain(before.memory);
    // The task.
    const tasks = expectOk(await second.ipc(s, 'tool.invoke.list_tasks', {}));
    expect(tasks.tasks.map((t: { task_id: string }) => t.task_id)).toContain(before.task);
    // The standing approval: listed, and the call it covers runs without asking anyone.
    expect(second.core.standing.list().map((a) => a.id)).toContain(before.standing);
    expect((await second.ipc(s, 'tool.invoke.delete_everything', { target: 'old-photos' })).out).toEqual({ deleted: 'old-photos' });
    expect(second.core.confirmations.list('family')).toEqual([]);
    // The conversation and the usage, from their restored files.
    const kept = new ConversationStore(join(second.dataDir, 'conversation.sqlite'), settings);
    expect(kept.list('family').map((m) => m.text)).toEqual(expect.arrayContaining(['Remember the dentist on Friday', 'Noted: the dentist on Friday.']));
    kept.close();
    const counted = new UsageStore(join(second.dataDir, 'llm', 'usage.sqlite'));
    expect(counted.get('family', DAY).input_tokens).toBeGreaterThanOrEqual(1234);
    counted.close();
    // The audit history: the entries from before the backup, and the new core's after them.
    const lines = readFileSync(second.auditFile, 'utf8').split('\n').filter((l) => l.endsWith('}')).map((l) => JSON.parse(l) as AuditEntry);
    expect(lines.some((e) => e.correlation === before.correlation && e.topic === 'tool.invoke.memory_store')).toBe(true);
    await until(() => (existsSync(second!.auditFile) ? readFileSync(second!.auditFile, 'utf8').includes('"reason":"core 0.1.0 started"') : false), 5000);
    // The workspace, as a folder the next attach makes its image from.
    expect(readFileSync(join(restoredTo, 'groups', 'family', 'notes.txt'), 'utf8')).toMatch(/^Biscuit eats at six\.\n/);
  }, 120_000);
});
