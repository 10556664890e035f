// The per-session budget against real ZeroMQ sockets: a hostile peer speaking raw ZMTP
// from its own process floods requests, stops reading, or floods connections; each is
// refused, then quarantined once, while another session's ipc calls keep working.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import type { Abuse } from '../../src/boundary/session-guard.js';
import type { Session } from '../../src/boundary/session-table.js';
import { Stack, until } from '../harness.js';
import { attackLocally } from '../support/zmtp-attacker.js';

const LIMITS = { requests_per_minute: 60, burst: 20, bytes_per_minute: 64 << 20, burst_bytes: 16 << 20, refusals_per_minute: 30, max_in_flight: 4, max_connections: 8, reply_high_water_mark: 2, reply_timeout_ms: 1000 };

let stack: Stack;
let quarantined: { session: string; group: string; abuse: Abuse }[] = [];

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], config: { sessions: LIMITS, groups: { family: {}, other: {} } } });
  stack.core.on('quarantined', (q) => quarantined.push(q));
});
afterAll(async () => {
  await stack?.stop();
});
afterEach(() => {
  quarantined = [];
});

/** Everything the core did about `session`: its CRITICAL entries and quarantine events. */
async function aftermath(session: Session) {
  const entries = (await stack.auditEntries()).filter((e) => e.session === session.id);
  return { critical: entries.filter((e) => e.severity === 'CRITICAL'), events: quarantined.filter((q) => q.session === session.id), entries };
}

async function otherGroupStillServed(): Promise<void> {
  const other = await stack.openSession('other');
  for (let i = 0; i < 3; i++) {
    const r = await stack.ipc(other, 'tool.invoke.echo', { text: `still here ${i}` }, { timeoutMs: 5000 });
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({ echoed: { text: `still here ${i}` } });
  }
  await stack.core.closeSession(other.id);
}

describe('request budget', () => {
  it('refuses a flood with RATE_LIMITED (retriable, retry_after), then quarantines the session once', async () => {
    const session = await stack.openSession('family');
    const attack = await attackLocally(session.socketPath, 'flood', { ATTACK_DURATION_MS: 5000 });
    // The first `burst` got through to stage 2 (unknown tool); then refusals; then the door shut.
    // (Replies still queued when the socket closes are dropped: on a loaded machine even all
    // of the burst's, so the audit says how far it got.)
    expect(attack.codes.UNKNOWN_TOOL ?? 0).toBeLessThanOrEqual(LIMITS.burst);
    expect(attack.codes.RATE_LIMITED).toBeGreaterThan(0);
    expect(attack.closed).toBe(1);
    // Bounded: a flood costs the core at most the burst plus the refusals before quarantine.
    expect(attack.replies).toBeLessThanOrEqual(LIMITS.burst + LIMITS.refusals_per_minute + 2);
    const { critical, events, entries } = await aftermath(session);
    expect(critical).toHaveLength(1);
    expect(critical[0]).toMatchObject({ code: 'QUARANTINED', reason: 'session quarantined: request_flood', group: 'family' });
    expect(events).toHaveLength(1);
    expect(entries.filter((e) => e.stage === 'rate_limit').length).toBeGreaterThan(0);
    const served = entries.filter((e) => e.code === 'UNKNOWN_TOOL').length;
    expect(served).toBeGreaterThan(0);
    expect(served).toBeLessThanOrEqual(LIMITS.burst);
    expect(existsSync(session.socketPath)).toBe(false);
    expect(stack.core.sessions.get(session.id)).toBeUndefined();
    await otherGroupStillServed();
  }, 20_000);

  it('tells the refused caller how long to wait', async () => {
    const session = await stack.openSession('family');
    for (let i = 0; i < LIMITS.burst; i++) await stack.ipc(session, 'tool.invoke.no_such_tool', {});
    const r = await stack.ipc(session, 'tool.invoke.echo', { text: 'one too many' });
    expect(r.code).toBe(1);
    expect(r.err).toMatchObject({ code: 'RATE_LIMITED', retriable: true });
    expect(r.err.retry_after).toBeGreaterThanOrEqual(1);
    await stack.core.closeSession(session.id);
  }, 20_000);
});

describe('back-pressure', () => {
  it('quarantines a peer that never reads its replies instead of buffering them', async () => {
    const session = await stack.openSession('family');
    // Within the request budget: only the replies it leaves unread give it away.
    const attack = await attackLocally(session.socketPath, 'unread', { ATTACK_DURATION_MS: 8000, ATTACK_TEXT_BYTES: 400_000, ATTACK_COUNT: LIMITS.max_in_flight + LIMITS.reply_high_water_mark });
    expect(attack.closed).toBe(1);
    const { critical, events } = await aftermath(session);
    expect(critical).toHaveLength(1);
    expect(critical[0].reason).toBe('session quarantined: unread_replies');
    expect(events.map((e) => e.abuse.kind)).toEqual(['unread_replies']);
    await otherGroupStillServed();
  }, 20_000);
  it('refuses more requests in flight than the bound, and quarantines a peer that keeps sending them', async () => {
    const session = await stack.openSession('family');
    // Unread 400 KB replies keep the first requests in flight; every later frame is refused.
    const attack = await attackLocally(session.socketPath, 'unread', { ATTACK_DURATION_MS: 8000, ATTACK_TEXT_BYTES: 400_000, ATTACK_COUNT: LIMITS.burst });
    expect(attack.closed).toBe(1);
    const { critical, events, entries } = await aftermath(session);
    expect(critical).toHaveLength(1);
    expect(events).toHaveLength(1);
    const refusals = entries.filter((e) => e.stage === 'rate_limit' && e.reason?.includes('in flight'));
    expect(refusals.length).toBeGreaterThan(0);
    await otherGroupStillServed();
  }, 20_000);
});

describe('connections', () => {
  it('quarantines a session that floods its socket with connections, and closes them all', async () => {
    const session = await stack.openSession('family');
    const attack = await attackLocally(session.socketPath, 'connections', { ATTACK_DURATION_MS: 8000, ATTACK_COUNT: 2000 });
    expect(attack.opened).toBeGreaterThan(LIMITS.max_connections);
    // The core closed every connection it had accepted, and the socket is gone.
    expect(attack.closed).toBeGreaterThanOrEqual(attack.opened);
    expect(existsSync(session.socketPath)).toBe(false);
    const { critical, events } = await aftermath(session);
    expect(critical).toHaveLength(1);
    expect(events.map((e) => e.abuse.kind)).toEqual(['connection_flood']);
    await otherGroupStillServed();
  }, 20_000);

  it('lets a legitimate agent run calls one after another and a few at once, unbothered', async () => {
    const session = await stack.openSession('family');
    const parallel = await Promise.all(Array.from({ length: LIMITS.max_in_flight }, (_, i) => stack.ipc(session, 'tool.invoke.echo', { text: `p${i}` })));
    for (const r of parallel) expect(r.code).toBe(0);
    for (let i = 0; i < 8; i++) expect((await stack.ipc(session, 'tool.invoke.echo', { text: `s${i}` })).code).toBe(0);
    expect(quarantined).toEqual([]);
    await stack.core.closeSession(session.id);
  }, 20_000);
});

describe('quarantine', () => {
  it('is one entry point, idempotent: one CRITICAL entry, one event, however often it is called', async () => {
    const session = await stack.openSession('family');
    const abuse: Abuse = { kind: 'request_flood', detail: 'called directly' };
    await Promise.all([stack.core.quarantine(session.id, abuse), stack.core.quarantine(session.id, abuse)]);
    await stack.core.quarantine(session.id, abuse);
    const { critical, events } = await aftermath(session);
    expect(critical).toHaveLength(1);
    expect(events).toHaveLength(1);
    await until(() => !existsSync(session.socketPath));
  });
});
