// A mail, end to end: Alice mails the agent's address through real Postfix, Dovecot
// serves it to the email plugin, the core starts the group's agent (real container, real
// Claude Code CLI), whose prompt holds the mail as marked, untrusted content; the model
// (a scripted stand-in for the Messages API) answers with `ipc tool.invoke.reply_email`;
// the reply waits for the person (a turn started by mail), who approves it on Telegram;
// and the reply lands in Alice's mailbox.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { eventually, ROOT, Stack, until } from '../harness.js';
import { newAgentManager } from '../support/agents.js';
import { AnthropicStandIn, hasTool, toolResults } from '../support/anthropic-standin.js';
import type { DkimKey } from '../support/dns-standin.js';
import { MailServers } from '../support/mail-servers.js';
import { runAgentsOnEvents } from '../support/milk-scenario.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const MODEL_KEY = 'sk-ant-api03-email-e2e-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAEmailE2eTokenForTheTelegramStandIn';
const AGENT = { address: 'agent@example.test', password: 'Ag3nt-e2e-s3cret-7Yp' };
const ALICE = { address: 'alice@example.test', password: 'alice-pw' };
const CHAT = 1201;
const OWNER = 42;
const REPLY = 'Yes, 8 pm works. I booked the table.';

let mail: MailServers;
let aliceKey: DkimKey;
let tg: TelegramStandIn;
let model: AnthropicStandIn;
let modelUrl: string;
let stack: Stack;
let manager: AgentManager;

beforeAll(async () => {
  mail = await MailServers.start([AGENT, ALICE]);
  // Alice's mail carries her domain's DKIM signature (the plugin admits nothing else).
  aliceKey = mail.dns.dkimKey('example.test');
  tg = await TelegramStandIn.start(BOT_TOKEN);
  // The model reads the mail's uid from its prompt, replies to it, then ends the turn.
  model = new AnthropicStandIn((request) => {
    if (!hasTool(request, 'Bash')) return [{ type: 'text', text: 'ok' }];
    if (toolResults(request).length > 0) return [{ type: 'text', text: 'Replied to Alice.' }];
    const uid = /uid: (\d+)/.exec(JSON.stringify(request.body.messages))?.[1];
    const args = { folder: 'INBOX', uid: Number(uid), to: [ALICE.address], body: REPLY };
    return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.reply_email '${JSON.stringify(args)}'`, description: 'Reply to the mail' } }];
  });
  modelUrl = await model.start();
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { email: join(ROOT, 'plugins/email'), telegram: join(ROOT, 'plugins/telegram') },
    env: { EMAIL_PASSWORD: AGENT.password, TELEGRAM_BOT_TOKEN: BOT_TOKEN },
    config: {
      groups: { family: {} },
      plugins: {
        telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'family' }, owners: [OWNER], poll_timeout_s: 1 },
        email: { ...mail.pluginSettings(AGENT), chats: { [ALICE.address]: 'family' }, mailboxes: { family: { recipients: [ALICE.address] } }, poll_interval_s: 5 },
      },
    },
  });
  if (stack.core.catalog.state('email') !== 'healthy') throw new Error(`email plugin not healthy:\n${stack.hostOutput}\n${mail.output}`);
  manager = newAgentManager(stack, { upstream: modelUrl, apiKey: MODEL_KEY, agents: { run_timeout_ms: 120_000 }, instance: `email-e2e-${process.pid}` });
  await manager.removeOrphans();
}, 90_000);

afterAll(async () => {
  await manager?.stop();
  await stack?.stop();
  await model?.stop();
  await tg?.close();
  await mail?.stop();
});

describe('a mail, end to end', () => {
  it('Alice mails → the real agent reads it as marked content → reply_email, approved on Telegram → the reply in her mailbox', async () => {
    const runs = runAgentsOnEvents(stack, manager);
    await mail.deliver(AGENT.address, { envelopeFrom: ALICE.address, subject: 'Dinner on Friday', text: 'Can we meet at 8 pm?\nAlice', sign: aliceKey });
    // The turn was started by mail: the reply waits for the person, who sees it in Telegram.
    const prompt = await until(() => tg.sentTo(CHAT).find((m) => m.reply_markup !== undefined && m.text.includes(REPLY)), 150_000).catch(async (err: unknown) => {
      const results = model.requests.map((r) => toolResults(r).join(' | ').slice(0, 400));
      const audit = (await stack.auditEntries()).slice(-15).map((e) => `${e.stage} ${e.outcome} ${e.topic ?? ''} ${e.reason ?? ''}`.slice(0, 300));
      throw new Error(`${String(err)}\nTelegram got: ${JSON.stringify(tg.sentTo(CHAT).map((m) => m.text.slice(0, 200)))}\nmodel requests: ${model.requests.length}, tool results: ${JSON.stringify(results)}\naudit: ${audit.join('\n')}`);
    });
    expect(prompt.text).toContain(`To: ${ALICE.address}`);
    const approve = prompt.reply_markup!.inline_keyboard!.flat().find((b) => b.text === 'Approve')!;
    tg.queueCallback({ chatId: CHAT, messageId: prompt.message_id, fromId: OWNER, data: approve.callback_data! });
    const reply = await eventually(async () => (await mail.inbox(ALICE)).find((m) => m.subject === 'Re: Dinner on Friday'), 30_000);
    expect(reply.source).toContain(REPLY);
    expect(((await Promise.all(runs)) as { ok: boolean }[]).every((r) => r.ok)).toBe(true);
    // What the real Claude Code sent the model: the mail between marked lines, said to be untrusted.
    const seen = JSON.stringify(model.requests.find((r) => hasTool(r, 'Bash'))!.body.messages);
    expect(seen).toMatch(/<<<external email [0-9a-f]{16}>>>/);
    expect(seen).toContain('Can we meet at 8 pm?');
    expect(seen).toContain('external, untrusted content');
    // Nobody was told the turn ended without an answer: the reply answered it.
    expect(tg.sentTo(CHAT).filter((m) => /without an answer/.test(m.text))).toEqual([]);
  }, 240_000);
});
