// Issue 22: a burst of messages (471 identical "Sorry, something went wrong" in 30 s for
// 500 messages). Messages that arrive while the agent works are batched into its next turn,
// in order; while the group's model budget is spent they wait for it to renew. The real core
// and agent manager, the real plugin host with the Telegram plugin and the real ipc binary;
// only the container is a scripted stand-in that answers once per turn.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { ROOT, sleep, Stack, until } from '../harness.js';
import { agentIpc, scriptedManager, scriptedRuntime } from '../support/scripted-runtime.js';
import { TelegramStandIn } from '../support/telegram-standin.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';

const TOKEN = '123456789:AAH-message-burst-token-0123456789';
const CHAT = 100;

let tg: TelegramStandIn;
let stack: Stack;
let manager: AgentManager;
/** The prompt of every turn, in order. */
const prompts: string[] = [];
/** How long a turn takes. */
let turnMs = 300;

beforeAll(async () => {
  tg = await TelegramStandIn.start(TOKEN);
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: TOKEN },
    config: {
      groups: { family: {} },
      plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'family' }, owners: [42], poll_timeout_s: 1 } },
    },
  });
  // A turn takes 300 ms and sends one reply.
  const runtime = scriptedRuntime(async (prompt, socket) => {
    prompts.push(prompt);
    await new Promise((r) => setTimeout(r, turnMs));
    await agentIpc(socket, 'tool.invoke.send_telegram', { recipient: String(CHAT), body: `reply ${prompts.length}` });
  });
  manager = scriptedManager(stack, runtime, 'burst');
});

afterAll(async () => {
  await manager?.stop();
  await stack?.stop();
  await tg?.close();
});

const texts = (from: number, n: number) => Array.from({ length: n }, (_, i) => `burst message ${from + i}`);
const seen = (text: string) => prompts.filter((p) => p.includes(`\n${text}\n`) || p.endsWith(`\n${text}`)).length;

describe('a burst of messages', () => {
  it('60 messages in a moment: a handful of turns, each message in exactly one, in order; a reply per turn and no error', async () => {
    for (const text of texts(0, 60)) tg.queueMessage({ chatId: CHAT, text, fromId: 42 });
    await until(() => texts(0, 60).every((t) => seen(t) === 1), 30_000);
    expect(prompts.length).toBeLessThanOrEqual(6);
    const order = prompts.join('\n').match(/burst message \d+/g)!;
    expect(order).toEqual(texts(0, 60));
    expect(prompts[1]).toMatch(/^\d+ messages arrived while you were busy, oldest first/);
    await until(() => tg.sentTo(CHAT).filter((m) => m.text.startsWith('reply ')).length === prompts.length, 10_000);
    expect(tg.sentTo(CHAT).filter((m) => !m.text.startsWith('reply '))).toEqual([]);
  }, 60_000);

  it('while the model budget is spent, messages wait and then run together when it renews', async () => {
    const before = prompts.length;
    manager.holdFor('family', 1500);
    for (const text of texts(100, 3)) tg.queueMessage({ chatId: CHAT, text, fromId: 42 });
    await new Promise((r) => setTimeout(r, 1000));
    expect(prompts.length).toBe(before);
    await until(() => prompts.length === before + 1, 5000);
    expect(prompts[before]).toMatch(/^3 messages arrived while you were busy/);
    for (const text of texts(100, 3)) expect(seen(text)).toBe(1);
  }, 30_000);

  it('more than 200 waiting: the rest are not handled, and the person is told once, in the chat', async () => {
    turnMs = 3000;
    const before = tg.sentTo(CHAT).length;
    try {
      for (const text of texts(1000, 230)) tg.queueMessage({ chatId: CHAT, text, fromId: 42 });
      const notice = await until(() => tg.sentTo(CHAT).slice(before).find((m) => m.text.includes('are already waiting')), 20_000);
      expect(notice.text).toMatch(/^Carapace: 200 messages are already waiting for the agent, so newer ones \("burst message 1\d\d\d" and any more\) are not handled until it catches up\. Send them again later\.$/);
      await sleep(1000);
      expect(tg.sentTo(CHAT).slice(before).filter((m) => m.text.includes('are already waiting'))).toHaveLength(1);
    } finally {
      turnMs = 300;
    }
  }, 90_000);
});
