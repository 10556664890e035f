// Standing approvals end to end: the real core, a real plugin host, the real ipc binary and
// the admin API over HTTP. A person answers "approve, and allow exactly this for N hours";
// the same call in the same group then asks nobody (audited, naming the approval); any
// other call still asks; a revoke takes it back at once.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import type { Session } from '../../src/boundary/session-table.js';
import { Stack, type IpcResult } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';

const TOKEN = 'standing-approvals-test-token';
const TOOL = 'delete_everything';

let stack: Stack;
let admin: FastifyInstance;
let base: string;
let family: Session;
let work: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['guarded'], config: { confirmation_timeout_ms: 20_000 } });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN);
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  family = await stack.openSession('family');
  work = await stack.openSession('work');
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const call = (session: Session, target: string): Promise<IpcResult> => stack.ipc(session, `tool.invoke.${TOOL}`, { target }, { timeoutMs: 25_000 });
const pendingFor = (session: Session, target: string) => stack.pendingConfirmation(session.group, (p) => p.session === session.id && p.arguments.target === target);

/** A call that must reach a person: it is denied, and its result says so. */
async function asksAPerson(session: Session, target: string): Promise<void> {
  const result = call(session, target);
  const pending = await pendingFor(session, target);
  expect((await api('POST', `/confirmations/${pending.id}/deny`)).status).toBe(200);
  expectError(await result, 'CONFIRMATION_DENIED');
}

async function audit(): Promise<AuditEntry[]> {
  return (await stack.auditText()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEntry);
}

describe('standing approvals', () => {
  it('"approve + allow 1 h" lets exactly that call through in that group, audited; anything else still asks', async () => {
    const first = call(family, 'old-photos');
    const pending = await pendingFor(family, 'old-photos');
    const answered = await api('POST', `/confirmations/${pending.id}/approve`, { allow_hours: 1 });
    expect(answered.body).toMatchObject({ decision: 'approved', standing: { group: 'family', tool: TOOL, arguments: { target: 'old-photos' }, created_by: 'admin-api' } });
    const standingId = answered.body.standing.id as string;
    expect((await first).out).toEqual({ deleted: 'old-photos' });

    const again = await call(family, 'old-photos');
    expect(again.out).toEqual({ deleted: 'old-photos' });
    expect(stack.core.confirmations.list()).toEqual([]);
    const entries = await audit();
    const used = entries.filter((e) => e.stage === 'confirm' && e.reason?.startsWith(`standing approval ${standingId} by admin-api`));
    expect(used).toHaveLength(1);
    expect(entries.filter((e) => e.correlation === used[0].correlation).map((e) => e.stage)).toEqual(['envelope', 'topic', 'payload', 'authorize', 'confirm', 'route', 'response']);
    expect(entries.some((e) => e.reason === `standing approval ${standingId} granted by admin-api until ${answered.body.standing.expires_at}`)).toBe(true);

    // Once an hour unless the person said more: the same call again at once asks a person.
    await asksAPerson(family, 'old-photos');
    expect((await audit()).some((e) => e.reason === `standing approval ${standingId} has no use left this hour (1 an hour): a person is asked`)).toBe(true);
    await asksAPerson(family, 'old-photos-2'); // other arguments
    await asksAPerson(work, 'old-photos'); // another group

    expect((await api('GET', '/standing-approvals')).body.standing.map((a: { id: string }) => a.id)).toEqual([standingId]);
    expect((await api('DELETE', `/standing-approvals/${standingId}`)).body).toEqual({ revoked: standingId });
    await asksAPerson(family, 'old-photos'); // revoked: asks again
    expect((await api('DELETE', `/standing-approvals/${standingId}`)).status).toBe(404);
    expect((await audit()).some((e) => e.reason === `standing approval ${standingId} revoked by admin-api`)).toBe(true);
  });

  it('made directly through the admin API only for a real tool, valid arguments and a bounded time', async () => {
    const bad = [
      { group: 'family', tool: 'no_such_tool', arguments: {}, hours: 1 },
      { group: 'family', tool: TOOL, arguments: { target: 1 }, hours: 1 },
      { group: 'family', tool: TOOL, arguments: { target: 'x', extra: true }, hours: 1 },
      { group: 'family', tool: TOOL, arguments: { target: 'x' }, hours: 24 * 365 },
      { group: '../etc', tool: TOOL, arguments: { target: 'x' }, hours: 1 },
      { group: 'family', tool: TOOL, arguments: [], hours: 1 },
    ];
    for (const body of bad) expect([body, (await api('POST', '/standing-approvals', body)).status]).toEqual([body, 400]);
    const made = await api('POST', '/standing-approvals', { group: 'work', tool: TOOL, arguments: { target: 'tmp' }, hours: 2 });
    expect(made.status).toBe(201);
    expect((await call(work, 'tmp')).out).toEqual({ deleted: 'tmp' });
    await asksAPerson(family, 'tmp');
    await api('DELETE', `/standing-approvals/${made.body.id}`);
  });

  it('without the admin token nothing is listed, made or revoked', async () => {
    for (const [method, path] of [['GET', '/standing-approvals'], ['POST', '/standing-approvals'], ['DELETE', '/standing-approvals/x']]) {
      const r = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? JSON.stringify({ group: 'family', tool: TOOL, arguments: { target: 'a' }, hours: 1 }) : undefined });
      expect([path, r.status]).toEqual([path, 401]);
    }
    expect(stack.core.standing.list()).toEqual([]);
  });
});
