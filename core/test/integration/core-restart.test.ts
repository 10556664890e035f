// The core crashes (kill -9) and Compose starts it again on the same sockets: the plugin
// host, still running, must find the new core by itself. Real core processes, the real
// plugin host process, the real ipc binary.
import { afterEach, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT, Stack, sleep, until } from '../harness.js';
import { TelegramStandIn } from '../support/telegram-standin.js';
import type { Session } from '../../src/boundary/session-table.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';

const CHILD = join(ROOT, 'dist/core/test/support/core-child.js');

interface Started {
  process: ChildProcess;
  session: Session;
  states: Record<string, string>;
}

/** A core process on the stack's folders; resolves with its session and its plugins' states. */
function startCore(stack: Stack): Promise<Started> {
  const child = spawn(process.execPath, [CHILD, stack.runDir, stack.pluginsDir, stack.auditFile, stack.configFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`core exited early (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      const { socketPath, states } = JSON.parse(line) as { socketPath: string; states: Record<string, string> };
      resolve({ process: child, session: { id: 'child', group: 'family', startedAt: '', container: null, socketPath }, states });
    });
  });
}

async function kill9(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

/** A Telegram stand-in (`tg`) and a stack whose Telegram plugin maps its chat 300 to "family"; `extra` adds plugins, their settings and host variables. */
async function telegramStack(extra: { plugins?: string[]; settings?: Record<string, unknown>; env?: Record<string, string> } = {}): Promise<Stack> {
  tg = await TelegramStandIn.start(BOT_TOKEN);
  return new Stack({
    plugins: extra.plugins ?? [],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: BOT_TOKEN, ...extra.env },
    config: { groups: { family: { tools: ['*'] } }, plugins: { ...extra.settings, telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { '300': 'family' }, poll_timeout_s: 1 } } },
  });
}

/** A core, then a plugin host (the host's bound on an absent core runs from its own start). */
async function startBoth(on: Stack): Promise<Started> {
  const starting = startCore(on);
  on.startHost();
  const started = await starting;
  cores.push(started.process);
  return started;
}

/** The audit file as the core processes wrote it so far. */
function auditEntries(stack: Stack): AuditEntry[] {
  if (!existsSync(stack.auditFile)) return [];
  return readFileSync(stack.auditFile, 'utf8').split('\n').filter((l) => l.endsWith('}')).map((l) => JSON.parse(l) as AuditEntry);
}

/**
 * The Telegram events the core accepted, once `count` are in its audit file (the core is
 * another process: its file may trail Telegram's confirmation), and a moment more for a
 * repeat to show.
 */
async function acceptedOnce(stack: Stack, count: number): Promise<AuditEntry[]> {
  const accepted = () => auditEntries(stack).filter((e) => e.stage === 'event' && e.source === 'telegram' && e.reason === 'event accepted');
  await until(() => accepted().length >= count, 10_000).catch(() => undefined);
  await sleep(500);
  return accepted();
}

const cores: ChildProcess[] = [];
let stack: Stack | null = null;

let tg: TelegramStandIn | null = null;
const BOT_TOKEN = '123456789:AAH-core-restart-test-token-0123456789';

afterEach(async () => {
  for (const core of cores.splice(0)) await kill9(core);
  await stack?.killHost();
  await tg?.close();
  tg = null;
});

describe('a core restart under a running plugin host', () => {
  it('the host registers again: plugins healthy, tools served and plugin events accepted by the new core', async () => {
    stack = new Stack({ plugins: ['echo', 'services'], config: { plugins: { services: { chats: { c1: 'family' } } } } });
    stack.startHost(); // it waits for a core
    const first = await startCore(stack);
    cores.push(first.process);
    expect(first.states).toEqual({ echo: 'healthy', services: 'healthy' });
    expect((await stack.ipc(first.session, 'tool.invoke.echo', { text: 'one' })).out?.echoed?.text).toBe('one');

    await kill9(first.process);
    const second = await startCore(stack);
    cores.push(second.process);
    expect(second.states).toEqual({ echo: 'healthy', services: 'healthy' });
    const echoed = await stack.ipc(second.session, 'tool.invoke.echo', { text: 'two' });
    expect(echoed.out?.echoed?.text).toBe('two');

    expect((await stack.ipc(second.session, 'tool.invoke.publish_inbound', { group: 'family', topic: 'message.inbound' })).code).toBe(0);
    const accepted = await until(() => {
      const entries = auditEntries(stack!);
      const restarted = entries.map((e) => e.stage === 'core' && e.reason?.includes('started')).lastIndexOf(true);
      return entries.slice(restarted).find((e) => e.stage === 'event' && e.source === 'services' && e.reason === 'event accepted');
    }, 5000);
    expect(accepted.topic).toBe('message.inbound');
  }, 60_000);

  it('a host whose core stays away gives up: unhealthy at once, then it exits, and what it held reaches the next core', async () => {
    stack = await telegramStack({ env: { CARAPACE_CORE_LOST_AFTER_MS: '4000' } });
    const health = join(stack.runDir, 'plugin-host.health');
    const first = await startBoth(stack);
    expect(first.states).toEqual({ telegram: 'healthy' });
    await until(() => existsSync(health), 5000); // written by the host once its link is up, a moment after the core sees it

    await kill9(first.process);
    await until(() => !existsSync(health), 5000);
    tg!.queueMessage({ chatId: 300, text: 'written while the core was away' });
    const host = stack.host!;
    const code = await new Promise((r) => host.once('exit', r));
    expect(code).toBe(1);
    expect(await stack.hostSaid('the core is gone: giving up')).toContain('the core is gone: giving up');

    await startBoth(stack);
    const accepted = await until(() => auditEntries(stack!).find((e) => e.stage === 'event' && e.source === 'telegram' && e.reason === 'event accepted'), 15_000);
    expect(accepted).toMatchObject({ group: 'family', topic: 'message.inbound' });
    expect(existsSync(health)).toBe(true);
  }, 60_000);

  it('a Telegram message that arrives while the core stops (SIGTERM, a tool call holding its drain open) reaches the next core once', async () => {
    stack = await telegramStack({ plugins: ['faulty'], settings: { faulty: { api_token: '${FAULTY_TOKEN}' } } });
    const first = await startBoth(stack);
    expect(first.states).toEqual({ faulty: 'healthy', telegram: 'healthy' });
    const held = stack.ipc(first.session, 'tool.invoke.slow', { ms: 3000 });
    await until(() => auditEntries(stack!).some((e) => e.topic === 'tool.invoke.slow' && e.stage === 'route'), 5000);

    const exited = new Promise((r) => first.process.once('exit', r));
    first.process.kill('SIGTERM');
    await sleep(200); // the stop has begun: its drain waits for the slow call
    const { update_id } = tg!.queueMessage({ chatId: 300, text: 'written while Carapace stops' });
    const pending = await until(() => auditEntries(stack!).find((e) => e.stage === 'event' && e.source === 'telegram'), 5000);
    expect(pending).toMatchObject({ outcome: 'pending', reason: 'not taken while the core stops: the plugin host keeps it for the next run' });
    expect((await held).code).toBe(0); // the call in flight finished
    await exited;
    expect(tg!.pendingUpdates().map((u) => u.update_id)).toEqual([update_id]); // the offset was not saved past it

    if (stack.host?.exitCode === null) await new Promise((r) => stack!.host!.once('exit', r));
    await startBoth(stack);
    await until(() => tg!.pendingUpdates().length === 0, 15_000);
    expect(await acceptedOnce(stack, 1)).toHaveLength(1);
  }, 60_000);

  it('a host killed with -9 while the core is away loses nothing it took from Telegram: the next core gets each message once', async () => {
    stack = await telegramStack();
    const health = join(stack.runDir, 'plugin-host.health');
    const first = await startBoth(stack);
    expect(first.states).toEqual({ telegram: 'healthy' });
    await until(() => existsSync(health), 5000);

    await kill9(first.process);
    await until(() => !existsSync(health), 5000);
    const ids = ['one', 'two', 'three'].map((text) => tg!.queueMessage({ chatId: 300, text: `while the core was away: ${text}` }).update_id);
    await until(() => tg!.handedOut.has(ids[0]), 10_000);
    // Time for the plugin to save its offset and fetch the rest, were it told it may: the host would hold them all.
    await sleep(1000);
    expect(tg!.pendingUpdates().map((u) => u.update_id)).toEqual(ids);
    await stack.killHost();

    await startBoth(stack);
    await until(() => tg!.pendingUpdates().length === 0, 15_000); // confirmed to Telegram once the core has them
    expect(await acceptedOnce(stack, 3)).toHaveLength(3);
  }, 60_000);
});
