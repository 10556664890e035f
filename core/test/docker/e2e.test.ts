// End to end, as in the specification's "full request lifecycle": a Telegram message
// arrives, the core starts the group's agent (real container, real Claude Code CLI),
// Claude Code runs `ipc` through its Bash tool, the plugin answers, Claude Code replies
// with send_telegram, and the Telegram stand-in receives it. The model is a scripted
// stand-in for the Messages API; Telegram is a stand-in for the Bot API.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { LlmProxy } from '../../src/llm/llm-proxy.js';
import { parseConfig } from '../../src/config.js';
import { ROOT, Stack, until } from '../harness.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { expectModelSawMessage, expectPipelineTrail, milkScript, sendUserMessage, startScenarioStack } from '../support/milk-scenario.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const MODEL_KEY = 'sk-ant-api03-e2e-model-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAE2eTestTokenForTheTelegramStandIn01';
const CHAT = 1001;

let stack: Stack;
let telegram: TelegramStandIn;
let model: AnthropicStandIn;
let manager: AgentManager;
let modelUrl: string;
const runs: Promise<unknown>[] = [];


beforeAll(async () => {
  telegram = await TelegramStandIn.start(BOT_TOKEN);
  model = new AnthropicStandIn(milkScript(CHAT));
  const upstream = await model.start();
  modelUrl = upstream;
  stack = await startScenarioStack(telegram, CHAT, BOT_TOKEN);
  const llm = new LlmProxy({ upstream, credential: { apiKey: MODEL_KEY }, audit: stack.core.audit });
  const settings = parseConfig({ agents: { run_timeout_ms: 120_000 } }).agents;
  manager = new AgentManager(stack.core, new DockerRuntime(), llm, settings, {
    groupsDir: join(stack.dir, 'groups'),
    stateDir: join(stack.dir, 'state'),
    agentImageDir: join(ROOT, 'agent-image'),
    instance: `e2e-${process.pid}`,
  }, () => ['family']);
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
    stack.core.on('event', (event) => {
      const run = manager.onEvent(event);
      if (run) runs.push(run);
    });
    const reply = await sendUserMessage(telegram, CHAT);
    expect(reply.text).toBe('Done! Reminder set for 5pm.');
    const [outcome] = (await Promise.all(runs)) as { ok: boolean; output: string }[];
    expect(outcome.ok).toBe(true);

    expectModelSawMessage(model, MODEL_KEY);

    expectPipelineTrail(await stack.auditEntries(), 'family');
  }, 180_000);

  it('a second message reuses the warm container', async () => {
    const first = manager.live('family');
    expect(first).not.toBeNull();
    await sendUserMessage(telegram, CHAT);
    expect(manager.live('family')?.container).toBe(first?.container);
    expect(((await runs.at(-1)) as { ok: boolean }).ok).toBe(true);
  }, 180_000);

  it('a hung agent is killed after the run limit and the user is told', async () => {
    await manager.retire('family');
    const impatient = new AgentManager(stack.core, new DockerRuntime(), new LlmProxy({ upstream: modelUrl, credential: { apiKey: MODEL_KEY }, audit: stack.core.audit }), parseConfig({ agents: { run_timeout_ms: 4000 } }).agents, {
      groupsDir: join(stack.dir, 'groups'),
      stateDir: join(stack.dir, 'state'),
      agentImageDir: join(ROOT, 'agent-image'),
      instance: `e2e-hung-${process.pid}`,
    }, () => ['family']);
    model.delayMs = 60_000;
    const sentBefore = telegram.sentTo(CHAT).length;
    try {
      const outcome = await impatient.enqueue('family', 'this will hang');
      expect(outcome.ok).toBe(false);
      expect(impatient.live('family')).toBeNull();
      const notice = await until(() => telegram.sentTo(CHAT).slice(sentBefore).find((m) => m.text.includes('Sorry, something went wrong')), 20_000);
      expect(notice.text).toContain('timeout');
      const entries = stack.core.audit.query({ group: 'family' }).filter((e) => e.stage === 'agent' && e.outcome === 'error');
      expect(entries.at(-1)?.reason).toContain('exceeded 4000 ms');
    } finally {
      model.delayMs = 0;
      await impatient.stop();
    }
  }, 60_000);
});
