// Issue 22: the memory specification's session-end sweep. Nothing told an agent its session
// ends (the idle timer removed its container); now, where memory serves the group, an idle
// agent first gets one bounded last turn to store what it learned, audited. The real core,
// plugin host with the real memory plugin and the real ipc binary; only the container is a
// scripted stand-in.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { ROOT, Stack, until } from '../harness.js';
import { agentIpc, scriptedManager, scriptedRuntime } from '../support/scripted-runtime.js';

let stack: Stack;
let manager: AgentManager;
const prompts: Array<{ group: string; prompt: string }> = [];
const stored: string[] = [];

beforeAll(async () => {
  stack = await Stack.start({
    plugins: ['echo'],
    extraPluginDirs: { memory: join(ROOT, 'plugins/memory') },
    // "work" may not use the memory plugin: its agent just goes.
    config: { groups: { family: {}, work: { plugins: ['echo'] } } },
  });
  const runtime = scriptedRuntime(async (prompt, socket, session) => {
    const group = stack.core.sessions.get(session)?.group ?? '?';
    prompts.push({ group, prompt });
    if (prompt.startsWith('Carapace: this session ends now')) {
      stored.push(await agentIpc(socket, 'tool.invoke.memory_store', { type: 'preference', content: 'likes window seats' }));
      return 'stored one';
    }
    return 'answered';
  });
  manager = scriptedManager(stack, runtime, 'last-turn', { groups: ['family', 'work'], agents: { idle_timeout_ms: 1000, last_turn_ms: 5000 } });
});

afterAll(async () => {
  await manager?.stop();
  await stack?.stop();
});

describe('an idle agent\'s last turn', () => {
  it('where memory serves the group: one last turn to store what it learned, then the session ends; audited', async () => {
    expect((await manager.enqueue('family', 'I always want a window seat')).ok).toBe(true);
    await until(() => stack.core.audit.query({ group: 'family' }).some((e) => e.reason === 'session closed'), 10_000);
    expect(prompts.filter((p) => p.group === 'family').map((p) => p.prompt.split('\n')[0])).toEqual(['I always want a window seat', 'Carapace: this session ends now, because the conversation has been idle.']);
    expect(JSON.parse(stored[0])).toMatchObject({ type: 'preference', content: 'likes window seats' });
    const entries = stack.core.audit.query({ group: 'family' });
    const last = entries.find((e) => e.reason?.startsWith('last turn before the idle session ends'));
    expect(last).toMatchObject({ stage: 'agent', outcome: 'ok', reason: expect.stringMatching(/^last turn before the idle session ends: ok after \d+ ms$/) });
    expect(entries.findIndex((e) => e.reason === 'session closed')).toBeGreaterThan(entries.indexOf(last!));
  }, 20_000);

  it('where memory does not serve the group: no last turn, the session just ends', async () => {
    expect((await manager.enqueue('work', 'hello')).ok).toBe(true);
    await until(() => stack.core.audit.query({ group: 'work' }).some((e) => e.reason === 'session closed'), 10_000);
    expect(prompts.filter((p) => p.group === 'work').map((p) => p.prompt)).toEqual(['hello']);
  }, 20_000);
});
