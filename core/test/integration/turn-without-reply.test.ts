// A turn on a person's message that ends with no reply reaching them (issue 22: a
// send_telegram refused by the tool rate limit, and a model that did not try again) must
// not end in silence. The real core and agent manager, the real plugin host with the real
// Telegram plugin, the real ipc binary against the session's socket; only the container
// is a stand-in: a scripted "agent" that calls send_telegram once per turn, then ends it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { ROOT, Stack, until } from '../harness.js';
import { agentIpc, scriptedManager, scriptedRuntime } from '../support/scripted-runtime.js';
import { TelegramStandIn } from '../support/telegram-standin.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';

const TOKEN = '123456789:AAH-turn-without-reply-token-0123456';
const CHAT = 100;

let tg: TelegramStandIn;
let stack: Stack;
let manager: AgentManager;
const ipcResults: string[] = [];

beforeAll(async () => {
  tg = await TelegramStandIn.start(TOKEN);
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: TOKEN },
    config: {
      groups: { family: {} },
      // One reply a minute: the second turn's send is refused with RATE_LIMITED.
      tool_rate_limits: { send_telegram: { per_minute: 1, burst: 1 } },
      plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'family' }, owners: [42], poll_timeout_s: 1 } },
    },
  });
  // Each turn: one send_telegram, then the turn ends.
  const runtime = scriptedRuntime(async (prompt, socket) => {
    ipcResults.push(await agentIpc(socket, 'tool.invoke.send_telegram', { recipient: String(CHAT), body: `answer to ${prompt.length} characters` }));
  });
  manager = scriptedManager(stack, runtime, 'turn');
});

afterAll(async () => {
  await manager?.stop();
  await stack?.stop();
  await tg?.close();
});

describe('a turn that ends without a reply reaching the person', () => {
  it('a reply delivered: nothing more is said; a reply refused by the rate limit: the person is told the turn ended without an answer', async () => {
    tg.queueMessage({ chatId: CHAT, text: 'what is the weather', fromId: 42 });
    await until(() => tg.sentTo(CHAT).find((m) => m.text.startsWith('answer to')), 20_000);
    await until(() => ipcResults.length === 1, 5000);

    tg.queueMessage({ chatId: CHAT, text: 'and tomorrow?', fromId: 42 });
    await until(() => ipcResults.length === 2, 20_000);
    expect(ipcResults[1]).toContain('RATE_LIMITED');
    const notice = await until(() => tg.sentTo(CHAT).find((m) => m.text.includes('without an answer reaching you')), 10_000);
    expect(notice.text).toContain('"and tomorrow?"');
    // What failed, not a guess: the tool, its code and its message.
    expect(notice.text).toContain('without an answer reaching you: its send_telegram failed: RATE_LIMITED: Rate limit exceeded for send_telegram (1 requests/minute). Send it again if you still need it.');
    expect(notice.text).not.toContain('may have been refused, e.g. by a rate limit');
    // Once, and only for the turn that had no answer.
    await new Promise((r) => setTimeout(r, 500));
    expect(tg.sentTo(CHAT).map((m) => m.text.startsWith('answer to') ? 'answer' : m.text.includes('without an answer') ? 'notice' : m.text)).toEqual(['answer', 'notice']);
  }, 60_000);
});
