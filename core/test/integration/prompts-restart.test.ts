// Confirmation prompts in Telegram outlive the core that asked: a core killed with -9, or
// stopped, while a prompt has live buttons. What the person sees in the chat must say how
// the request ended, within seconds of the core being back, and a late press must not
// claim it was "already answered". Real core processes (core-child), the real plugin host
// with the real Telegram plugin, the real ipc binary, a Bot API stand-in.
import { afterEach, describe, expect, it } from '@jest/globals';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { IPC_BIN, ROOT, Stack, until } from '../harness.js';
import { TelegramStandIn, type SentMessage } from '../support/telegram-standin.js';
import type { Session } from '../../src/boundary/session-table.js';

const CHILD = join(ROOT, 'dist/core/test/support/core-child.js');
const BOT_TOKEN = '123456789:AAH-prompts-restart-test-token-012345';
const CHAT = 300;
const OWNER = 42;
const RESTARTED = 'This request ended when Carapace restarted; nothing ran.';

function startCore(stack: Stack): Promise<{ process: ChildProcess; session: Session }> {
  const child = spawn(process.execPath, [CHILD, stack.runDir, stack.pluginsDir, stack.auditFile, stack.configFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`core exited early (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      const { socketPath, states } = JSON.parse(line) as { socketPath: string; states: Record<string, string> };
      if (states.telegram !== 'healthy') reject(new Error(`telegram is ${states.telegram}`));
      resolve({ process: child, session: { id: 'child', group: 'family', startedAt: '', container: null, socketPath } });
    });
  });
}

async function kill9(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

const cores: ChildProcess[] = [];
/** The agent's side: an ipc call waiting for the person, ended with the test. */
const calls: ChildProcess[] = [];
let stack: Stack | null = null;
let tg: TelegramStandIn | null = null;

afterEach(async () => {
  for (const core of cores.splice(0)) await kill9(core);
  for (const call of calls.splice(0)) await kill9(call);
  await stack?.killHost();
  if (stack) rmSync(stack.dir, { recursive: true, force: true });
  await tg?.close();
  tg = null;
});

/** A core, the plugin host with Telegram and the guarded tool, and a prompt with live buttons in the chat. */
async function promptOpen(target: string): Promise<{ core: ChildProcess; prompt: SentMessage }> {
  tg = await TelegramStandIn.start(BOT_TOKEN);
  stack = new Stack({
    plugins: ['guarded'],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: BOT_TOKEN },
    config: { groups: { family: {} }, confirmation_timeout_ms: 60_000, plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'family' }, owners: [OWNER], poll_timeout_s: 1 } } },
  });
  const starting = startCore(stack);
  stack.startHost();
  const { process: core, session } = await starting;
  cores.push(core);
  calls.push(execFile(IPC_BIN, ['tool.invoke.delete_everything', JSON.stringify({ target })], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${session.socketPath}`, CARAPACE_IPC_TIMEOUT_MS: '60000' } }));
  const prompt = await until(() => tg!.sentTo(CHAT).find((m) => m.reply_markup !== undefined && m.text.includes(target)), 10_000);
  return { core, prompt };
}

const editOf = (prompt: SentMessage) => () => tg!.edits.find((e) => e.chat_id === String(CHAT) && e.message_id === prompt.message_id);

describe('a prompt open when the core goes away', () => {
  it('kill -9 of the core: within seconds of the new core, the prompt says the request ended with the restart, and a press says so too', async () => {
    const { core, prompt } = await promptOpen('the-archive');
    await kill9(core);
    expect(tg!.edits).toHaveLength(0); // a killed core says nothing
    cores.push((await startCore(stack!)).process);
    const backAt = Date.now();
    const edit = await until(editOf(prompt), 10_000);
    expect(Date.now() - backAt).toBeLessThan(5000);
    expect(edit.text).toBe(`${prompt.text}\n\n${RESTARTED}`);
    expect(edit.reply_markup).toBeUndefined(); // the buttons are gone

    // A press that still comes (an old client showing the buttons): the truth, not "Already answered".
    const data = prompt.reply_markup!.inline_keyboard![0][0].callback_data!;
    const press = tg!.queueCallback({ chatId: CHAT, messageId: prompt.message_id, fromId: OWNER, data });
    const answer = await until(() => tg!.callbackAnswers.find((a) => a.callback_query_id === press.id), 10_000);
    expect(answer.text).toBe(RESTARTED);
  }, 60_000);

  it('the plugin host restarted too (its memory gone): the prompt is still closed once the core is back', async () => {
    const { core, prompt } = await promptOpen('the-photos');
    await kill9(core);
    await stack!.killHost();
    stack!.startHost();
    cores.push((await startCore(stack!)).process);
    const edit = await until(editOf(prompt), 10_000);
    expect(edit.text).toBe(`${prompt.text}\n\n${RESTARTED}`);
  }, 60_000);

  it('the core stopped (SIGTERM) with the plugin host still running: the prompt says it was withdrawn, nothing ran', async () => {
    const { core, prompt } = await promptOpen('the-music');
    const exited = new Promise((r) => core.once('exit', r));
    core.kill('SIGTERM');
    await exited;
    const edit = await until(editOf(prompt), 10_000);
    expect(edit.text).toBe(`${prompt.text}\n\nWithdrawn (core: shutting down): nothing ran`);
  }, 60_000);
});
