// End to end, as in the specification's "full request lifecycle": a Telegram message
// arrives, the core starts the group's agent (real container, real Claude Code CLI),
// Claude Code runs `ipc` through its Bash tool, the plugin answers, Claude Code replies
// with send_telegram, and the Telegram stand-in receives it. The model is a scripted
// stand-in for the Messages API; Telegram is a stand-in for the Bot API.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { until } from '../harness.js';
import { newAgentManager } from '../support/agents.js';
import {
  apologySince,
  expectHungAgentKilled,
  expectModelSawMessage,
  expectPipelineTrail,
  expectWarmContainerReused,
  HUNG_RUN_TIMEOUT_MS,
  REPLY,
  runAgentsOnEvents,
  sendUserMessage,
  startMilkScenario,
  type MilkScenario,
} from '../support/milk-scenario.js';

const MODEL_KEY = 'sk-ant-api03-e2e-model-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAE2eTestTokenForTheTelegramStandIn01';
const CHAT = 1001;

let scenario: MilkScenario;
let manager: AgentManager;
let runs: Promise<unknown>[] = [];

beforeAll(async () => {
  scenario = await startMilkScenario(CHAT, BOT_TOKEN);
  manager = newAgentManager(scenario.stack, { upstream: scenario.modelUrl, apiKey: MODEL_KEY, agents: { run_timeout_ms: 120_000 }, instance: `e2e-${process.pid}` });
  await manager.removeOrphans();
}, 60_000);

afterAll(async () => {
  await manager?.stop();
  await scenario?.stop();
});

describe('a Telegram message, end to end', () => {
  it('"remind me to buy milk at 5pm" → agent → ipc → plugin → send_telegram → Telegram', async () => {
    runs = runAgentsOnEvents(scenario.stack, manager);
    const reply = await sendUserMessage(scenario.telegram, CHAT);
    expect(reply.text).toBe(REPLY);
    const [outcome] = (await Promise.all(runs)) as { ok: boolean; output: string }[];
    expect(outcome.ok).toBe(true);

    expectModelSawMessage(scenario.model, MODEL_KEY);

    expectPipelineTrail(await scenario.stack.auditEntries(), 'family');
  }, 180_000);

  it('a second message reuses the warm container', async () => {
    await expectWarmContainerReused(scenario, manager, runs);
  }, 180_000);

  it('Stop while the agent is still starting ends its turn once it is up: the model never sees the message', async () => {
    await manager.retire('family');
    const sentBefore = scenario.telegram.sentTo(scenario.chat).length;
    const turn = manager.enqueue('family', 'think about this for a long time');
    await until(() => manager.states.list().some((s) => s.group === 'family' && s.state === 'starting'), 30_000);
    expect(await manager.end('family', 'stopped from the console', 'console')).toBe(true);
    expect(await turn).toEqual({ ok: false, output: 'stopped from the console' });
    expect(manager.live('family')).toBeNull();
    expect(scenario.model.requests.filter((r) => JSON.stringify(r.body).includes('think about this'))).toEqual([]);
    expect((await scenario.stack.auditEntries()).some((e) => e.reason === 'agent stopped: stopped from the console')).toBe(true);
    // The person hears why, once (and before the next test listens for its own notice).
    expect((await apologySince(scenario, sentBefore)).text).toContain('stopped from the console');
  }, 120_000);

  it('a hung agent is killed after the run limit and the user is told', async () => {
    await manager.retire('family');
    const impatient = newAgentManager(scenario.stack, { upstream: scenario.modelUrl, apiKey: MODEL_KEY, agents: { run_timeout_ms: HUNG_RUN_TIMEOUT_MS }, instance: `e2e-hung-${process.pid}` });
    await expectHungAgentKilled(scenario, impatient, 60_000);
  }, 60_000);
});
