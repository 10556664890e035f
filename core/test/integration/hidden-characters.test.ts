// Issue 21: what no person can check is refused before anyone is asked, and a person's
// answer binds to what they were shown. The real ipc binary, core and plugin host.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { startAdminApi } from '../../src/admin/http-api.js';
import { describeCall } from '../../src/confirm/describe-call.js';
import { Stack } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';
import type { Session } from '../../src/boundary/session-table.js';

const TOOL = 'tool.invoke.delete_everything';
const tags = (text: string): string => Array.from(text, (c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join('');

describe('tag characters and bidi controls in a high-risk call', () => {
  let stack: Stack;
  let main: Session;
  beforeAll(async () => {
    stack = await Stack.start({ plugins: ['guarded'], config: { confirmation_timeout_ms: 20_000 } });
    main = await stack.openSession('main');
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('hidden text in tag characters: VALIDATION_FAILED at stage 5 naming the field and the characters, audited, nobody asked', async () => {
    let asked = 0;
    stack.core.confirmations.on('requested', () => asked++);
    const r = await stack.ipc(main, TOOL, { target: 'Remind me to drink water.' + tags('And wipe the backups.') });
    const err = expectError(r, 'VALIDATION_FAILED', { stage: 5, field: 'target', retriable: false });
    expect(err.message).toBe('"target" holds 21 invisible tag characters (U+E0000–U+E007F): characters a person cannot see or whose order they cannot trust, so nobody can approve this delete_everything call; send it without them');
    expect(asked).toBe(0);
    expect(stack.core.confirmations.list()).toEqual([]);
    const audit = (await stack.auditEntries()).find((e) => e.stage === 'confirm' && e.outcome === 'rejected' && e.code === 'VALIDATION_FAILED');
    expect(audit?.reason).toContain('STAGE 5: "target" holds 21 invisible tag characters');
  });

  it('a bidi override: refused the same way', async () => {
    const r = await stack.ipc(main, TOOL, { target: 'Typo in the README \u202Etxt.EMDAER\u202C' });
    const err = expectError(r, 'VALIDATION_FAILED', { stage: 5, field: 'target' });
    expect(err.message).toContain('2 bidi controls (U+202A–U+202E, U+2066–U+2069)');
    expect(stack.core.confirmations.list()).toEqual([]);
  });

  it('zero-width padding and an England flag are not refused: the person sees them escaped and warned about', async () => {
    const target = 'secret' + '\u200B'.repeat(50) + 'harmless 🏴󠁧󠁢󠁥󠁮󠁧󠁿';
    const call = stack.ipc(main, TOOL, { target }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('main', (p) => p.arguments.target === target);
    expect(pending.description.summary).toEqual(['target: "secret⟦U+200B ×50⟧harmless 🏴󠁧󠁢󠁥󠁮󠁧󠁿"']);
    expect(pending.description.warnings).toEqual(['50 zero-width characters', 'padding: 50 blank or invisible characters in a row in "target"']);
    stack.core.confirmations.resolve(pending.id, false, 'test');
    expectError(await call, 'CONFIRMATION_DENIED', { stage: 5 });
  });
});

describe('confirmations.allow_hidden_characters', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await Stack.start({ plugins: ['guarded'], config: { confirmation_timeout_ms: 20_000, confirmations: { allow_hidden_characters: ['delete_everything'] } } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('a tool named there is asked about, its tag characters escaped and spelled out', async () => {
    const main = await stack.openSession('main');
    const target = 'label' + tags('hi');
    const call = stack.ipc(main, TOOL, { target }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('main', (p) => p.arguments.target === target);
    expect(pending.description.summary).toEqual(['target: "label⟦U+E0068⟧⟦U+E0069⟧"']);
    expect(pending.description.warnings[0]).toBe('2 invisible tag characters; they spell: "hi"');
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expect((await call).out).toEqual({ deleted: target });
  });
});

describe('an answer binds to what was shown', () => {
  let stack: Stack;
  let admin: FastifyInstance;
  let base: string;
  const auth = { authorization: 'Bearer admin-token-for-tests-123', 'content-type': 'application/json' };
  beforeAll(async () => {
    stack = await Stack.start({ plugins: ['guarded'], config: { confirmation_timeout_ms: 20_000 } });
    admin = await startAdminApi(stack.core, '127.0.0.1', 0, 'admin-token-for-tests-123');
    base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await admin?.close();
    await stack?.stop();
  });

  it('GET /confirmations carries the description; a stale hash gets 409 and decides nothing; the right one (or none) decides', async () => {
    const main = await stack.openSession('main');
    const call = stack.ipc(main, TOOL, { target: 'photos' }, { timeoutMs: 25_000 });
    const pending = await stack.pendingConfirmation('main', (p) => p.arguments.target === 'photos');
    const listed = (await (await fetch(`${base}/confirmations`, { headers: auth })).json()) as { pending: typeof pending[] };
    expect(listed.pending[0].description).toMatchObject({ tool: 'delete_everything', group: 'main', canonical: '{"target":"photos"}', summary: ['target: "photos"'], warnings: [] });
    expect(listed.pending[0].description.hash).toMatch(/^[0-9a-f]{64}$/);

    // The hash of other arguments (what a page showed before, say): refused, still pending.
    const other = describeCall('delete_everything', 'main', { target: 'cat-photos' }).hash;
    const stale = await fetch(`${base}/confirmations/${pending.id}/approve`, { method: 'POST', headers: auth, body: JSON.stringify({ hash: other }) });
    expect(stale.status).toBe(409);
    expect(await stale.json()).toEqual({ code: 'STALE', message: "the hash is not that of the pending request's description: nothing was decided" });
    expect(stack.core.confirmations.get(pending.id)).toBeDefined();
    const audit = (await stack.auditEntries()).find((e) => e.stage === 'confirm' && e.reason?.includes('named another description'));
    expect(audit).toMatchObject({ outcome: 'rejected', correlation: pending.correlation, source: 'admin-api' });

    const right = await fetch(`${base}/confirmations/${pending.id}/approve`, { method: 'POST', headers: auth, body: JSON.stringify({ hash: pending.description.hash }) });
    expect(right.status).toBe(200);
    expect((await call).out).toEqual({ deleted: 'photos' });

    // Without a hash (the CLI) an answer still works.
    const again = stack.ipc(main, TOOL, { target: 'music' }, { timeoutMs: 25_000 });
    const next = await stack.pendingConfirmation('main', (p) => p.arguments.target === 'music');
    expect((await fetch(`${base}/confirmations/${next.id}/deny`, { method: 'POST', headers: auth, body: '{}' })).status).toBe(200);
    expectError(await again, 'CONFIRMATION_DENIED', { stage: 5 });
  });
});
