// Attacks on the core from inside a real agent container (docker exec as uid 1000, node,
// raw ZMTP on the mounted session socket): a request flood, replies left unread, a
// connection flood. Each must be refused, then quarantined once (container stopped, one
// CRITICAL audit entry, one notice to the user), while another group's agent keeps
// working through its own session. Needs the carapace-agent image (`make images`).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { Abuse } from '../../src/boundary/session-guard.js';
import type { JsonObject } from '../../src/protocol/envelope.js';
import { sleep, Stack } from '../harness.js';
import { newAgentManager, testRuntime, sh } from '../support/agents.js';
import { AnthropicStandIn, toolResults, type Policy } from '../support/anthropic-standin.js';
import { ATTACKER_SOURCE, type AttackMode, type AttackResult } from '../support/zmtp-attacker.js';

let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
const quarantines: { session: string; group: string; abuse: Abuse }[] = [];
/** What the core told the channels: user.notify and agent.error, per group. */
const told: { topic: string; group: string | null; payload: JsonObject }[] = [];

beforeAll(async () => {
  // Defaults throughout, but a peer that does not read is caught after 2 s rather than 10,
  // and the burst refills at 2 a second rather than 20: 300 calls in a shell loop then meet
  // the limit however slowly a loaded machine runs them (at 20 a second, a loop slower than
  // 15 ms a call never did: CI saw none refused).
  stack = await Stack.start({ plugins: ['echo', 'guarded'], config: { groups: { family: {}, other: {} }, sessions: { reply_timeout_ms: 2000, requests_per_minute: 120 } } });
  const publish = stack.core.publish.bind(stack.core);
  stack.core.publish = (topic, group, payload, source, except) => {
    if (topic === 'user.notify' || topic === 'agent.error') told.push({ topic, group, payload });
    return publish(topic, group, payload, source, except);
  };
  stack.core.on('quarantined', (q) => quarantines.push(q));
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-guard', agents: { run_timeout_ms: 60_000 }, instance: `guard-${process.pid}`, runtime, groups: ['family', 'other'] });
  await manager.removeOrphans();
  await manager.enqueue('other', 'warm up');
}, 180_000);

afterAll(async () => {
  await manager?.stop();
  await standIn?.stop();
  await stack?.stop();
});

beforeEach(async () => {
  if (!manager.live('family')) expect((await manager.enqueue('family', 'start')).ok).toBe(true);
}, 120_000);

async function eventually(probe: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(50);
  }
}

/** Another group's agent calls a tool through its own session; it must just work. */
async function otherGroupCalls(n: number): Promise<void> {
  const other = manager.live('other')!;
  for (let i = 0; i < n; i++) {
    const r = await sh(runtime, other.container, `ipc tool.invoke.echo '{"text":"other ${i}"}'`);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ group: 'other', echoed: { text: `other ${i}` } });
  }
}

/**
 * Runs the attacker in the family container as its agent would (uid 1000) and waits for
 * the core to quarantine the session, checking another group along the way. Bounded: on
 * code without the guard nothing is quarantined and this fails after 60 s (a loaded
 * machine gets that long to send its attack).
 */
async function attackFromInside(mode: AttackMode, env: Record<string, string | number>): Promise<{ result: AttackResult | null; kind: Abuse['kind']; session: string; container: string }> {
  const family = manager.live('family')!;
  const name = `attack-${mode}-${family.session}.json`;
  const vars = Object.entries({ ATTACK_MODE: mode, ATTACK_OUT: `/workspace/group/${name}`, ATTACK_DURATION_MS: 50_000, ...env }).map(([k, v]) => `${k}=${v}`);
  const attack = runtime.exec(family.container, ['env', ...vars, 'node', '-e', ATTACKER_SOURCE], 70_000).catch(() => null);
  await otherGroupCalls(2);
  await eventually(() => quarantines.some((q) => q.session === family.session), 60_000);
  await attack;
  const file = join(stack.dir, 'groups', 'family', name);
  const result = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as AttackResult) : null;
  rmSync(file, { force: true });
  rmSync(`${file}.tmp`, { force: true });
  return { result, kind: quarantines.find((q) => q.session === family.session)!.abuse.kind, ...family };
}

/** Quarantine's aftermath: container gone, one CRITICAL entry, one notice, the other group served. */
async function expectQuarantined(session: string, container: string, kind: Abuse['kind']): Promise<void> {
  await eventually(async () => !(await runtime.isRunning(container)), 30_000);
  expect(manager.live('family')?.session).not.toBe(session);
  expect(quarantines.filter((q) => q.session === session).map((q) => q.abuse.kind)).toEqual([kind]);
  const critical = (await stack.auditEntries()).filter((e) => e.session === session && e.severity === 'CRITICAL');
  expect(critical).toHaveLength(1);
  expect(critical[0]).toMatchObject({ group: 'family', code: 'QUARANTINED', reason: `session quarantined: ${kind}` });
  await otherGroupCalls(2);
  // Exactly one message for the user: the notice, and no apology after it.
  const forFamily = told.filter((t) => t.group === 'family' && (t.topic === 'agent.error' || t.payload.text !== undefined));
  const notices = forFamily.filter((t) => t.topic === 'user.notify' && String(t.payload.text).includes('stopped this chat'));
  expect(notices.length).toBe(quarantines.filter((q) => q.group === 'family').length);
  expect(forFamily.filter((t) => t.topic === 'agent.error')).toEqual([]);
}

describe('attacks on the session socket from inside an agent container', () => {
  it('a request flood is refused with RATE_LIMITED, then quarantined', async () => {
    // Past the burst (200 by default, refilled at 2 a second here), even bad requests are refused before stage 2, retriably.
    const family = manager.live('family')!;
    const calls = await sh(runtime, family.container, `for i in $(seq 1 300); do ipc tool.invoke.no_such_tool '{}' 2>&1; done`);
    const codes = calls.out.trim().split('\n').map((l) => JSON.parse(l) as { code: string; retriable: boolean; retry_after?: number });
    expect(codes).toHaveLength(300);
    const limited = codes.filter((c) => c.code === 'RATE_LIMITED');
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]).toMatchObject({ retriable: true });
    expect(limited[0].retry_after).toBeGreaterThanOrEqual(1);
    expect(quarantines).toEqual([]);
    // A flood keeps going regardless: then the door shuts.
    const { kind, session, container } = await attackFromInside('flood', {});
    expect(kind).toBe('request_flood');
    const refused = (await stack.auditEntries()).filter((e) => e.session === session && e.stage === 'rate_limit' && e.code === 'RATE_LIMITED');
    expect(refused.length).toBeGreaterThan(0);
    await expectQuarantined(session, container, 'request_flood');
  }, 120_000);

  it('replies left unread are not buffered without end: quarantined, core memory bounded', async () => {
    const before = process.memoryUsage().rss;
    // Within the request budget (40 of 400 KB); only the unread replies give it away.
    const { kind, session, container } = await attackFromInside('unread', { ATTACK_COUNT: 40, ATTACK_TEXT_BYTES: 400_000 });
    expect(kind).toBe('unread_replies');
    // The core here is this process: what it holds for one session is bounded (in flight × 1 MB, replies × HWM).
    expect((process.memoryUsage().rss - before) / 1024 / 1024).toBeLessThan(150);
    await expectQuarantined(session, container, 'unread_replies');
  }, 120_000);

  it('a connection flood is cut off at the bound and quarantined', async () => {
    const { result, kind, session, container } = await attackFromInside('connections', { ATTACK_COUNT: 5000 });
    expect(kind).toBe('connection_flood');
    if (result) expect(result.opened).toBeLessThan(5000);
    await expectQuarantined(session, container, 'connection_flood');
  }, 120_000);

  it('quarantined in the middle of a turn: the turn ends, and the user still gets one message, no apology', async () => {
    // The model has the agent wait on a high-risk call (a person must confirm it) while the attack runs.
    const quiet = standIn.policy;
    const waiting: Policy = (request) =>
      toolResults(request).length === 0
        ? [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.delete_everything '{"target":"all"}'`, description: 'Delete' } }]
        : [{ type: 'text', text: 'done' }];
    standIn.policy = waiting;
    try {
      const turn = manager.enqueue('family', 'delete everything');
      await stack.pendingConfirmation('family', (p) => p.tool === 'delete_everything');
      const { kind, session, container } = await attackFromInside('flood', {});
      // A flooder busy writing reads its replies slowly: either bound may catch it first.
      expect(['request_flood', 'unread_replies']).toContain(kind);
      expect((await turn).ok).toBe(false);
      await expectQuarantined(session, container, kind);
    } finally {
      standIn.policy = quiet;
    }
  }, 120_000);

  it("the group's next message starts a fresh agent on a fresh session", async () => {
    // One quarantined session per attack above, and none of them is the one now live.
    expect(new Set(quarantines.map((q) => q.session)).size).toBe(4);
    const r = await manager.enqueue('family', 'hello again');
    expect(r.ok).toBe(true);
    const live = manager.live('family')!;
    expect(quarantines.map((q) => q.session)).not.toContain(live.session);
    const info = await sh(runtime, live.container, `ipc tool.invoke.get_session_info '{}'`);
    expect(info.code).toBe(0);
  }, 120_000);
});
