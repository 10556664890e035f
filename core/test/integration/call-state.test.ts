// Issue 21: what a person approves is what runs, when a call names something by an opaque
// id or depends on state the agent can change. The real core, plugin host and ipc binary;
// the guarded fixture's forget_note names notes by ids its plugin describes (describeCall).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { Session } from '../../src/boundary/session-table.js';
import { hashOf } from '../../src/confirm/describe-call.js';
import { Stack } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';

const TOKEN = 'call-state-test-token';
let stack: Stack;
let family: Session;
let admin: FastifyInstance;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['guarded'], config: { confirmation_timeout_ms: 20_000 } });
  family = await stack.openSession('family');
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN);
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
});

const forgets = (id: string) => (p: { tool: string; arguments: Record<string, unknown> }) => p.tool === 'forget_note' && p.arguments.note_id === id;

describe('a call that names something by an opaque id', () => {
  it('the prompt says what the id names, from the plugin, and the answer binds to it', async () => {
    const call = stack.ipc(family, 'tool.invoke.forget_note', { note_id: '60ce838e-rent' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('family', forgets('60ce838e-rent'));
    expect(pending.description.state).toEqual(['The note "Pay the rent (do not delete)"']);
    expect(pending.description.full).toContain('What it refers to (from the plugin):\nThe note "Pay the rent (do not delete)"');
    // The hash covers what was shown: the arguments alone do not name this prompt.
    expect(pending.description.canonical).toBe('{"note_id":"60ce838e-rent"}');
    expect(pending.description.hash).not.toBe(hashOf(pending.description.canonical));
    stack.core.confirmations.resolve(pending.id, false, 'test');
    expectError(await call, 'CONFIRMATION_DENIED', { stage: 5 });
  });

  it('what the id names changes after the prompt (the agent renames it): the approval runs nothing', async () => {
    const call = stack.ipc(family, 'tool.invoke.forget_note', { note_id: '60ce838e-rent' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('family', forgets('60ce838e-rent'));
    expect(pending.description.state).toEqual(['The note "Pay the rent (do not delete)"']);
    expect((await stack.ipc(family, 'tool.invoke.rename_note', { note_id: '60ce838e-rent', title: 'Harmless old note' })).code).toBe(0);
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expectError(await call, 'STATE_CHANGED', { stage: 5 });
    // Still there: asking again shows what it names now.
    const again = stack.ipc(family, 'tool.invoke.forget_note', { note_id: '60ce838e-rent' }, { timeoutMs: 25_000 });
    const second = await stack.pendingConfirmation('family', forgets('60ce838e-rent'));
    expect(second.description.state).toEqual(['The note "Harmless old note"']);
    stack.core.confirmations.resolve(second.id, false, 'test');
    expectError(await again, 'CONFIRMATION_DENIED', { stage: 5 });
  });

  it('a standing approval holds only while what it names stays what the person saw; then a person is asked, shown what it names now', async () => {
    const r = await fetch(`http://127.0.0.1:${(admin.server.address() as AddressInfo).port}/standing-approvals`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ group: 'family', tool: 'forget_note', arguments: { note_id: '7d1f02aa-list' }, hours: 1 }),
    });
    expect(r.status).toBe(201);
    const granted = (await r.json()) as { id: string; state: string[] };
    expect(granted.state).toEqual(['The note "Old shopping list"']);
    // The agent points the granted id at something else, then uses the grant.
    expect((await stack.ipc(family, 'tool.invoke.rename_note', { note_id: '7d1f02aa-list', title: 'Tax documents 2026' })).code).toBe(0);
    const call = stack.ipc(family, 'tool.invoke.forget_note', { note_id: '7d1f02aa-list' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('family', forgets('7d1f02aa-list'));
    expect(pending.description.state).toEqual(['The note "Tax documents 2026"']);
    const audit = await stack.auditEntries();
    expect(audit.some((e) => e.reason === `standing approval ${granted.id} was given when the call referred to something else: a person is asked`)).toBe(true);
    stack.core.confirmations.resolve(pending.id, false, 'test');
    expectError(await call, 'CONFIRMATION_DENIED', { stage: 5 });
    expect(stack.core.standing.list('family').find((a) => a.id === granted.id)?.used_at).toEqual([]);
  });

  it('an answer that grants a standing approval records what the person saw with it', async () => {
    const call = stack.ipc(family, 'tool.invoke.forget_note', { note_id: '7d1f02aa-list' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('family', forgets('7d1f02aa-list'));
    const answered = stack.core.answerConfirmation(pending.id, true, 'test', 1, pending.description.hash);
    expect(answered.standing).toMatchObject({ state: ['The note "Tax documents 2026"'], state_hash: pending.state_hash });
    expect(await call).toMatchObject({ code: 0, out: { forgotten: 'Tax documents 2026' } });
  });
});
