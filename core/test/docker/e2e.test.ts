// End to end, as in the specification's "full request lifecycle": a Telegram message
// arrives, the core starts the group's agent (real container, real Claude Code CLI),
// Claude Code runs `ipc` through its Bash tool, the plugin answers, Claude Code replies
// with send_telegram, and the Telegram stand-in receives it. The model is a scripted
// stand-in for the Messages API; Telegram is a stand-in for the Bot API.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { Stack } from '../harness.js';
import { newAgentManager } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import {
  expectHungAgentKilled,
  expectModelSawMessage,
  expectPipelineTrail,
  expectWarmContainerReused,
  HUNG_RUN_TIMEOUT_MS,
  milkScript,
  runAgentsOnEvents,
  sendUserMessage,
  startScenarioStack,
} from '../support/milk-scenario.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const MODEL_KEY = 'sk-ant-api03-e2e-model-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAE2eTestTokenForTheTelegramStandIn01';
const CHAT = 1001;

let stack: Stack;
let telegram: TelegramStandIn;
let model: AnthropicStandIn;
let manager: AgentManager;
let modelUrl: string;
let runs: Promise<unknown>[] = [];

beforeAll(async () => {
  telegram = await TelegramStandIn.start(BOT_TOKEN);
  model = new AnthropicStandIn(milkScript(CHAT));
  modelUrl = await model.start();
  stack = await startScenarioStack(telegram, CHAT, BOT_TOKEN);
  manager = newAgentManager(stack, { upstream: modelUrl, apiKey: MODEL_KEY, agents: { run_timeout_ms: 120_000 }, instance: `e2e-${process.pid}` });
  await manager.removeOrphans();
}, 60_000);

afterAll(async () => {
  await manager?.stop();
  await stack?.stop();
  await model?.stop();
  await telegram?.close();
});

describe('a Telegram message, end to end', () => {
  it('"remind me to buy milk at 5pm" → agent → ipc → plugin → send_telegram → Telegram', async () => {
    runs = runAgentsOnEvents(stack, manager);
    const reply = await sendUserMessage(telegram, CHAT);
    expect(reply.text).toBe('Done! Reminder set for 5pm.');
    const [outcome] = (await Promise.all(runs)) as { ok: boolean; output: string }[];
    expect(outcome.ok).toBe(true);

    expectModelSawMessage(model, MODEL_KEY);

    expectPipelineTrail(await stack.auditEntries(), 'family');
  }, 180_000);

  it('a second message reuses the warm container', async () => {
    await expectWarmContainerReused(manager, telegram, CHAT, runs);
  }, 180_000);

  it('a hung agent is killed after the run limit and the user is told', async () => {
    await manager.retire('family');
    const impatient = newAgentManager(stack, { upstream: modelUrl, apiKey: MODEL_KEY, agents: { run_timeout_ms: HUNG_RUN_TIMEOUT_MS }, instance: `e2e-hung-${process.pid}` });
    await expectHungAgentKilled({ stack, telegram, model, chat: CHAT }, impatient, 60_000);
  }, 60_000);
});
