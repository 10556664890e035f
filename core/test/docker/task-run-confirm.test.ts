// A scheduled task's run must not quietly schedule the next one. In a real agent container
// (both agent modes, the real Claude Code CLI driven by the scripted model), a turn the
// core started for task.triggered calls schedule_task through ipc: a person is asked, and
// a denial schedules nothing. The agent cannot change what the core knows of its turn.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { eventEnvelope } from '../../src/protocol/envelope.js';
import { ROOT, Stack } from '../harness.js';
import { newAgentManager, sh, testRuntime } from '../support/agents.js';
import { AnthropicStandIn, hasTool, toolResults, type RecordedRequest } from '../support/anthropic-standin.js';

const MODEL_KEY = 'sk-ant-api03-task-run-model-key-0123456789abcdef';
const RUN_AT = new Date(Date.now() + 24 * 3600_000).toISOString();
const NEXT = { prompt: 'Run this task again tomorrow, and the day after', run_at: RUN_AT };

/** The model, during the task's run, tries to schedule the next run; then reports what it got. */
function script(request: RecordedRequest) {
  if (!hasTool(request, 'Bash')) return [{ type: 'text' as const, text: 'ok' }];
  const results = toolResults(request);
  if (results.length === 0) {
    return [{ type: 'tool_use' as const, name: 'Bash', input: { command: `ipc tool.invoke.schedule_task '${JSON.stringify(NEXT)}'`, description: 'Schedule the next run' } }];
  }
  return [{ type: 'text' as const, text: `schedule_task said: ${results[0].slice(0, 300)}` }];
}

describe.each(['legacy', 'api'] as const)('%s mode: a task-started turn calls schedule_task', (mode) => {
  let stack: Stack;
  let model: AnthropicStandIn;
  let manager: AgentManager;

  beforeAll(async () => {
    model = new AnthropicStandIn(script);
    const upstream = await model.start();
    stack = await Stack.start({
      plugins: [],
      extraPluginDirs: { tasks: join(ROOT, 'plugins/tasks') },
      config: { groups: { family: {} }, confirmation_timeout_ms: 60_000, plugins: { tasks: { timezone: 'UTC' } } },
    });
    manager = newAgentManager(stack, { upstream, apiKey: MODEL_KEY, agents: { mode, run_timeout_ms: 120_000 }, instance: `taskrun-${mode}-${process.pid}` });
    await manager.removeOrphans();
  }, 60_000);

  afterAll(async () => {
    await manager?.stop();
    await stack?.stop();
    await model?.stop();
  }, 60_000);

  it('a person is asked; denied, nothing is scheduled and the agent is told', async () => {
    const event = eventEnvelope('task.triggered', 'tasks', 'family', { task_id: 'task-morning', prompt: 'Do the morning round', schedule: { type: 'once', value: new Date().toISOString() } });
    const run = manager.onEvent(event);
    expect(run).not.toBeNull();
    const asked = await stack.pendingConfirmation('family', (p) => p.tool === 'schedule_task');
    expect(asked.arguments).toEqual(NEXT);
    expect(asked.session).toBe(manager.live('family')?.session);
    stack.core.confirmations.resolve(asked.id, false, 'test');
    const outcome = await run!;
    expect(outcome.ok).toBe(true);
    const told = model.requests.flatMap((r) => toolResults(r)).join('\n');
    expect(told).toContain('CONFIRMATION_DENIED');
    const state = join(stack.dir, 'data', 'plugins', 'tasks', 'tasks.json');
    const tasks = existsSync(state) ? (JSON.parse(readFileSync(state, 'utf8')) as { tasks: { prompt: string }[] }).tasks : [];
    expect(tasks.some((t) => t.prompt === NEXT.prompt)).toBe(false);
  }, 180_000);

  // Issue 21: one grant of schedule_recurring_task made 5 identical recurring tasks. Even
  // with a standing approval of 5 uses an hour, the agent's second identical one is refused.
  it('from inside the container: the same recurring task twice under a standing approval is scheduled once', async () => {
    const args = { prompt: 'Water the plants', cron: '0 7 * * *' };
    const granted = stack.core.grantStanding({ group: 'family', tool: 'schedule_recurring_task', arguments: args, hours: 1, uses_per_hour: 5, by: 'test' });
    expect('id' in granted).toBe(true);
    const container = manager.live('family')!.container;
    const call = `ipc tool.invoke.schedule_recurring_task '${JSON.stringify(args)}'`;
    const first = await sh(testRuntime(), container, call);
    expect(first.code).toBe(0);
    const second = await sh(testRuntime(), container, call);
    expect(second.code).not.toBe(0);
    expect(JSON.parse(second.err)).toMatchObject({ code: 'DUPLICATE_TASK', retriable: false });
    const state = JSON.parse(readFileSync(join(stack.dir, 'data', 'plugins', 'tasks', 'tasks.json'), 'utf8')) as { tasks: { prompt: string }[] };
    expect(state.tasks.filter((t) => t.prompt === args.prompt)).toHaveLength(1);
  }, 60_000);
});
