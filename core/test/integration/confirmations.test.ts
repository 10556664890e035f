// Confirmations a person can trust (issue 12), with the real ipc binary, the real core
// and a real plugin host: the call waits as long as the person, a caller that is gone
// withdraws its request, a retry joins the pending one, a flood reaches the person at
// most `max_pending_per_group` times.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { IPC_BIN, Stack, tryParse, type IpcResult } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';
import type { PendingConfirmation } from '../../src/confirm/confirmations.js';
import type { Session } from '../../src/boundary/session-table.js';

const CONFIG = {
  handler_timeout_ms: 2000,
  confirmation_timeout_ms: 120_000,
  confirmations: { max_pending_per_group: 3, keepalive_ms: 300 },
};
const TOOL = 'tool.invoke.delete_everything';

let stack: Stack;
let family: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['guarded'], config: CONFIG });
  family = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

/** ipc as the agent runs it: no CARAPACE_IPC_TIMEOUT_MS, so its own default (35 s) applies. */
function call(session: Session, target: string): { child: ChildProcess; result: Promise<IpcResult> } {
  const child = spawn(IPC_BIN, [TOOL, JSON.stringify({ target })], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${session.socketPath}` } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const result = new Promise<IpcResult>((resolve) =>
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr, out: tryParse(stdout), err: tryParse(stderr) })),
  );
  return { child, result };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const targets = (target: string) => (p: PendingConfirmation) => p.arguments.target === target;

/** How many times the handler was given the request of `correlation` (audited route decisions). */
async function runs(correlation: string): Promise<number> {
  const entries = (await stack.auditText()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return entries.filter((e) => e.stage === 'route' && e.topic === TOOL && e.correlation === correlation).length;
}

async function until<T>(get: () => Promise<T | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}

describe('the call waits as long as the person', () => {
  it('an approval given after 60 s reaches the caller, and the action runs once', async () => {
    const { result } = call(family, 'slow-person');
    const pending = await stack.pendingConfirmation('family', targets('slow-person'));
    await sleep(60_000); // well past ipc's own 35 s default
    expect(stack.core.confirmations.resolve(pending.id, true, 'test')).toBe(true);
    const r = await result;
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ deleted: 'slow-person' });
    expect(await runs(pending.correlation)).toBe(1);
  }, 90_000);
});

describe('a caller that is gone withdraws its request', () => {
  it('ipc killed while its session lives: withdrawn, an approval after that runs nothing', async () => {
    const { child, result } = call(family, 'killed-caller');
    const pending = await stack.pendingConfirmation('family', targets('killed-caller'));
    const resolved = new Promise<string>((r) => stack.core.confirmations.on('resolved', (p, d) => p.id === pending.id && r(d)));
    child.kill('SIGKILL');
    await result;
    expect(await resolved).toBe('withdrawn');
    expect(stack.core.confirmations.resolve(pending.id, true, 'test')).toBe(false);
    expect(await runs(pending.correlation)).toBe(0);
  });

  it('session ended (its container retired): withdrawn, nothing runs', async () => {
    const session = await stack.openSession('family');
    const { child, result } = call(session, 'ended-session');
    const pending = await stack.pendingConfirmation('family', targets('ended-session'));
    await stack.core.closeSession(session.id);
    expect(stack.core.confirmations.get(pending.id)).toBeUndefined();
    expect(stack.core.confirmations.resolve(pending.id, true, 'test')).toBe(false);
    child.kill('SIGKILL');
    await result;
    expect(await runs(pending.correlation)).toBe(0);
    const audit = await stack.auditText();
    expect(audit).toContain(`confirmation withdrawn by core: session ended`);
  });
});

describe('ask once', () => {
  it('a retry with the same tool and arguments while one is pending joins it: one prompt, one run, both answered', async () => {
    const prompts: PendingConfirmation[] = [];
    const count = (p: PendingConfirmation) => targets('retried')(p) && prompts.push(p);
    stack.core.confirmations.on('requested', count);
    const first = call(family, 'retried');
    const pending = await stack.pendingConfirmation('family', targets('retried'));
    const second = call(family, 'retried');
    // The retry is in once it is audited as joined.
    await until(async () => (await stack.auditText()).includes('joined it (one prompt, one action)'));
    await sleep(200);
    stack.core.confirmations.off('requested', count);
    expect(prompts).toHaveLength(1);
    expect(stack.core.confirmations.list('family').filter(targets('retried'))).toHaveLength(1);
    stack.core.confirmations.resolve(pending.id, true, 'test');
    const [a, b] = await Promise.all([first.result, second.result]);
    expect(a.out).toEqual({ deleted: 'retried' });
    expect(b.out).toEqual({ deleted: 'retried' });
    // One action: every route decision since the first call is the first call's.
    const entries = (await stack.auditText()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const since = entries.findIndex((e) => e.correlation === pending.correlation);
    expect(entries.slice(since).filter((e) => e.stage === 'route' && e.topic === TOOL).map((e) => e.correlation)).toEqual([pending.correlation]);
  });
});

describe('caps', () => {
  it('a flood from one group: at most 3 reach the person, the rest get a retriable CONFIRMATION_LIMIT', async () => {
    const prompts: PendingConfirmation[] = [];
    const count = (p: PendingConfirmation) => p.group === 'family' && prompts.push(p);
    stack.core.confirmations.on('requested', count);
    const calls = Array.from({ length: 12 }, (_, i) => call(family, `flood-${i}`));
    const refused = await Promise.all(calls.map((c) => Promise.race([c.result, sleep(3000).then(() => null)])));
    stack.core.confirmations.off('requested', count);
    const errors = refused.filter((r): r is IpcResult => r !== null);
    expect(prompts).toHaveLength(3);
    expect(errors).toHaveLength(9);
    for (const r of errors) expectError(r, 'CONFIRMATION_LIMIT', { stage: 5, retriable: true });
    for (const p of prompts) stack.core.confirmations.resolve(p.id, false, 'test');
    await Promise.all(calls.map((c) => c.result));
  });
});
