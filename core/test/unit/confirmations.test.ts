import { describe, it, expect } from '@jest/globals';
import { Confirmations, type Decision, type PendingConfirmation } from '../../src/confirm/confirmations.js';

function input(group = 'main', tool = 'delete_all') {
  return { group, session: 'sess-1', tool, correlation: 'corr-1', arguments: { path: '/x' } };
}

describe('Confirmations', () => {
  it('request emits "requested" with an id and an expiry timeoutMs ahead', async () => {
    const c = new Confirmations(60_000);
    const seen: PendingConfirmation[] = [];
    c.on('requested', (p) => seen.push(p));
    const before = Date.now();
    const { pending, answer } = c.request(input())!;
    const after = Date.now();
    expect(seen).toEqual([pending]);
    expect(pending.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(pending).toMatchObject(input());
    const requested = Date.parse(pending.requested_at);
    const expires = Date.parse(pending.expires_at);
    expect(requested).toBeGreaterThanOrEqual(before);
    expect(requested).toBeLessThanOrEqual(after);
    expect(expires - requested).toBe(60_000);
    expect(c.get(pending.id)).toBe(pending);
    c.denyAll('test-cleanup');
    await answer;
  });

  it('gives every request a distinct id', () => {
    const c = new Confirmations(60_000);
    const a = c.request(input())!;
    const b = c.request(input())!;
    expect(a.pending.id).not.toBe(b.pending.id);
    c.denyAll('cleanup');
  });

  it('resolve(approve) settles with "approved" and who answered', async () => {
    const c = new Confirmations(60_000);
    const resolved: Array<[string, Decision, string]> = [];
    c.on('resolved', (p, d, by) => resolved.push([p.id, d, by]));
    const { pending, answer } = c.request(input())!;
    expect(c.resolve(pending.id, true, 'dashboard:alice')).toBe(true);
    await expect(answer).resolves.toEqual({ decision: 'approved', by: 'dashboard:alice' });
    expect(resolved).toEqual([[pending.id, 'approved', 'dashboard:alice']]);
    expect(c.get(pending.id)).toBeUndefined();
    expect(c.list()).toEqual([]);
  });

  it('resolve(deny) settles with "denied"', async () => {
    const c = new Confirmations(60_000);
    const { pending, answer } = c.request(input())!;
    expect(c.resolve(pending.id, false, 'cli')).toBe(true);
    await expect(answer).resolves.toEqual({ decision: 'denied', by: 'cli' });
  });

  it('resolve of an unknown id returns false', () => {
    const c = new Confirmations(60_000);
    expect(c.resolve('no-such-id', true, 'x')).toBe(false);
  });

  it('a second resolve after settling returns false and does not change the decision', async () => {
    const c = new Confirmations(60_000);
    let resolvedCount = 0;
    c.on('resolved', () => resolvedCount++);
    const { pending, answer } = c.request(input())!;
    expect(c.resolve(pending.id, false, 'first')).toBe(true);
    expect(c.resolve(pending.id, true, 'second')).toBe(false);
    await expect(answer).resolves.toEqual({ decision: 'denied', by: 'first' });
    expect(resolvedCount).toBe(1);
  });

  it('times out with decision "timeout" by "core"', async () => {
    const c = new Confirmations(20);
    const resolved: Decision[] = [];
    c.on('resolved', (_p, d) => resolved.push(d));
    const { pending, answer } = c.request(input())!;
    await expect(answer).resolves.toEqual({ decision: 'timeout', by: 'core' });
    expect(resolved).toEqual(['timeout']);
    expect(c.get(pending.id)).toBeUndefined();
    expect(c.resolve(pending.id, true, 'late')).toBe(false);
  });

  it('an answer before the timeout is not overridden by the timer', async () => {
    const c = new Confirmations(20);
    const resolved: Decision[] = [];
    c.on('resolved', (_p, d) => resolved.push(d));
    const { pending, answer } = c.request(input())!;
    c.resolve(pending.id, true, 'quick');
    await expect(answer).resolves.toEqual({ decision: 'approved', by: 'quick' });
    await new Promise((r) => setTimeout(r, 40));
    expect(resolved).toEqual(['approved']);
  });

  it('denyAll denies every pending confirmation', async () => {
    const c = new Confirmations(60_000);
    const a = c.request(input('main'))!;
    const b = c.request(input('family'))!;
    c.denyAll('shutdown');
    await expect(a.answer).resolves.toEqual({ decision: 'denied', by: 'shutdown' });
    await expect(b.answer).resolves.toEqual({ decision: 'denied', by: 'shutdown' });
    expect(c.list()).toEqual([]);
  });

  it('list filters by group', () => {
    const c = new Confirmations(60_000);
    const a = c.request(input('main', 't1'))!;
    const b = c.request(input('family', 't2'))!;
    const d = c.request(input('main', 't3'))!;
    expect(c.list().map((p) => p.id).sort()).toEqual([a.pending.id, b.pending.id, d.pending.id].sort());
    expect(c.list('main').map((p) => p.id).sort()).toEqual([a.pending.id, d.pending.id].sort());
    expect(c.list('family').map((p) => p.id)).toEqual([b.pending.id]);
    expect(c.list('nobody')).toEqual([]);
    c.resolve(a.pending.id, true, 'x');
    expect(c.list('main').map((p) => p.id)).toEqual([d.pending.id]);
    c.denyAll('cleanup');
  });

  it('shutdown and a caller gone withdraw (not deny); at most maxPerGroup wait per group', async () => {
    const c = new Confirmations(60_000, 2);
    const a = c.request(input('main'))!;
    const b = c.request(input('main'))!;
    expect(c.request(input('main'))).toBeNull();
    const other = c.request(input('family'))!;
    c.withdrawSession('sess-1', 'core: session ended');
    await expect(a.answer).resolves.toEqual({ decision: 'withdrawn', by: 'core: session ended' });
    await expect(b.answer).resolves.toEqual({ decision: 'withdrawn', by: 'core: session ended' });
    await expect(other.answer).resolves.toEqual({ decision: 'withdrawn', by: 'core: session ended' });
    const d = c.request(input('main'))!;
    c.withdrawAll('core: shutting down');
    await expect(d.answer).resolves.toEqual({ decision: 'withdrawn', by: 'core: shutting down' });
    expect(c.list()).toEqual([]);
  });
});
