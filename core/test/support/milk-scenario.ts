// The specification's example conversation, shared by the end-to-end tests of both agent
// modes: the scripted model records "buy milk at 5pm" with a tool, then replies on
// Telegram, then ends the turn.
import { expect } from '@jest/globals';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { ROOT, Stack, until } from '../harness.js';
import { AnthropicStandIn, hasTool, toolResults, type Block, type RecordedRequest } from './anthropic-standin.js';
import { TelegramStandIn, type SentMessage } from './telegram-standin.js';

const USER_MESSAGE = 'remind me to buy milk at 5pm';
export const REPLY = 'Done! Reminder set for 5pm.';

/** How the model records the reminder: a tool whose result repeats "buy milk at 5pm". */
export interface RecordTool {
  tool: string;
  args: Record<string, unknown>;
}
const ECHO_RECORD: RecordTool = { tool: 'echo', args: { text: 'buy milk at 5pm' } };

function milkScript(chat: number, record: RecordTool = ECHO_RECORD): (request: RecordedRequest) => Block[] {
  return (request) => {
    if (!hasTool(request, 'Bash')) return [{ type: 'text', text: 'ok' }];
    const results = toolResults(request);
    if (results.length === 0) {
      return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.${record.tool} '${JSON.stringify(record.args)}'`, description: 'Record the reminder' } }];
    }
    if (results.length === 1) {
      const body = results[0].includes('buy milk at 5pm') ? REPLY : `Something failed: ${results[0].slice(0, 200)}`;
      return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.send_telegram '${JSON.stringify({ recipient: String(chat), body })}'`, description: 'Reply' } }];
    }
    return [{ type: 'text', text: 'Replied to the user.' }];
  };
}

/** Both tool calls crossed every pipeline stage, each under one correlation, in the group. */
export function expectPipelineTrail(entries: AuditEntry[], group: string, record: RecordTool = ECHO_RECORD): void {
  for (const topic of [`tool.invoke.${record.tool}`, 'tool.invoke.send_telegram']) {
    const response = entries.find((e) => e.topic === topic && e.stage === 'response');
    expect(response?.outcome).toBe('ok');
    const trail = entries.filter((e) => e.correlation === response?.correlation);
    expect(trail.map((e) => e.stage)).toEqual(['envelope', 'topic', 'payload', 'authorize', 'route', 'response']);
    expect(trail.every((e) => e.group === group)).toBe(true);
  }
}

/** A core and plugin host with the echo plugin and the real Telegram plugin, `chat` mapped to "family". */
async function startScenarioStack(telegram: TelegramStandIn, chat: number, botToken: string): Promise<Stack> {
  const stack = await Stack.start({
    plugins: ['echo'],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: botToken },
    config: {
      groups: { family: {} },
      plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: telegram.url, chats: { [String(chat)]: 'family' }, owners: [42], poll_timeout_s: 1 } },
    },
  });
  try {
    expect(stack.core.catalog.state('telegram')).toBe('healthy');
  } catch (err) {
    await stack.stop().catch(() => undefined);
    throw err;
  }
  return stack;
}

/** The user writes the message; resolves with the bot's answer to it (or its apology: an agent error). */
export function sendUserMessage(telegram: TelegramStandIn, chat: number): Promise<SentMessage> {
  const before = telegram.sentTo(chat).length;
  telegram.queueMessage({ chatId: chat, text: USER_MESSAGE, fromId: 42 });
  const answer = (m: SentMessage): boolean => m.text.startsWith('Done!') || m.text.startsWith('Something failed') || m.text.startsWith('Sorry, something went wrong');
  // Attached at once: a caller may start the bot only after this (a message waiting for it).
  return until(() => telegram.sentTo(chat).slice(before).find(answer), 150_000);
}

/** The model saw the user's message, and every request to it carried the real key (added by the proxy). */
export function expectModelSawMessage(model: AnthropicStandIn, modelKey: string): void {
  const main = model.requests.filter((r) => (r.body?.tools ?? []).length > 0);
  expect(JSON.stringify(main[0].body.messages)).toContain(USER_MESSAGE);
  expect(model.requests.every((r) => r.headers['x-api-key'] === modelKey)).toBe(true);
}

/** Hands each of the core's events to the manager; the runs it starts, in order. */
export function runAgentsOnEvents(stack: Stack, manager: AgentManager): Promise<unknown>[] {
  const runs: Promise<unknown>[] = [];
  stack.core.on('event', (event) => {
    const run = manager.onEvent(event);
    if (run) runs.push(run);
  });
  return runs;
}

/** The user writes again: the family's warm container answers, and the run succeeds. */
export async function expectWarmContainerReused(s: MilkScenario, manager: AgentManager, runs: Promise<unknown>[]): Promise<void> {
  const first = manager.live('family');
  expect(first).not.toBeNull();
  await sendUserMessage(s.telegram, s.chat);
  expect(manager.live('family')?.container).toBe(first?.container);
  expect(((await runs.at(-1)) as { ok: boolean }).ok).toBe(true);
}

/** The run limit of the manager given to expectHungAgentKilled. */
export const HUNG_RUN_TIMEOUT_MS = 4000;

/** The stand-ins and a scenario stack on them; stop() stops the stack, then the stand-ins. */
export interface MilkScenario {
  stack: Stack;
  telegram: TelegramStandIn;
  model: AnthropicStandIn;
  modelUrl: string;
  chat: number;
  stop(): Promise<void>;
}

/** The Telegram and model stand-ins, the model scripted with milkScript. */
export interface StandIns {
  telegram: TelegramStandIn;
  model: AnthropicStandIn;
  modelUrl: string;
  /** Stops the model, then the Telegram stand-in. */
  close(): Promise<void>;
}

/** `host`: the address both listen on (loopback unless containers must reach them). */
export async function startStandIns(chat: number, botToken: string, record: RecordTool = ECHO_RECORD, host = '127.0.0.1'): Promise<StandIns> {
  const telegram = await TelegramStandIn.start(botToken, host);
  const model = new AnthropicStandIn(milkScript(chat, record));
  const modelUrl = await model.start(host);
  return {
    telegram,
    model,
    modelUrl,
    async close() {
      await model.stop();
      await telegram.close();
    },
  };
}

export async function startMilkScenario(chat: number, botToken: string): Promise<MilkScenario> {
  const standIns = await startStandIns(chat, botToken);
  let stack: Stack;
  try {
    stack = await startScenarioStack(standIns.telegram, chat, botToken);
  } catch (err) {
    await standIns.close().catch(() => undefined);
    throw err;
  }
  return {
    stack,
    telegram: standIns.telegram,
    model: standIns.model,
    modelUrl: standIns.modelUrl,
    chat,
    async stop() {
      await stack.stop();
      await standIns.close();
    },
  };
}

/**
 * The model answers only after `delayMs` (longer than the run limit): `impatient`, a manager
 * with run_timeout_ms HUNG_RUN_TIMEOUT_MS, kills the family's agent, the user is told and
 * the audit log says why. `alsoCheck` runs once the run has failed. Stops `impatient`.
 */
export async function expectHungAgentKilled(s: MilkScenario, impatient: AgentManager, delayMs: number, alsoCheck: () => Promise<void> = async () => undefined): Promise<void> {
  s.model.delayMs = delayMs;
  const sentBefore = s.telegram.sentTo(s.chat).length;
  try {
    const outcome = await impatient.enqueue('family', 'this will hang');
    expect(outcome.ok).toBe(false);
    expect(impatient.live('family')).toBeNull();
    await alsoCheck();
    expect((await apologySince(s, sentBefore)).text).toContain('timeout');
    expect(lastAgentError(s)?.reason).toContain(`exceeded ${HUNG_RUN_TIMEOUT_MS} ms`);
  } finally {
    s.model.delayMs = 0;
    await impatient.stop();
  }
}

/** The apology the family was sent after its first `before` messages (an agent error). */
export function apologySince(s: MilkScenario, before: number): Promise<SentMessage> {
  return until(() => s.telegram.sentTo(s.chat).slice(before).find((m) => m.text.includes('Sorry, something went wrong')), 20_000);
}

/** The newest agent error the core audited for the family. */
export function lastAgentError(s: MilkScenario): AuditEntry | undefined {
  return s.stack.core.audit.query({ group: 'family' }).filter((e) => e.stage === 'agent' && e.outcome === 'error').at(-1);
}
