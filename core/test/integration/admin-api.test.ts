// The admin API answers confirmations for the dashboard and the CLI.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { startAdminApi } from '../../src/admin/http-api.js';
import { Stack } from '../harness.js';

let stack: Stack;
let admin: FastifyInstance;
let base: string;
const TOKEN = 'admin-token-for-tests-123';

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['guarded'] });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN);
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
});

const auth = { authorization: `Bearer ${TOKEN}` };

describe('admin API', () => {
  it('refuses calls without the token', async () => {
    expect((await fetch(`${base}/confirmations`)).status).toBe(401);
    expect((await fetch(`${base}/confirmations`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
  });

  it('lists a pending confirmation and approves it; the held ipc call then succeeds', async () => {
    const session = await stack.openSession('family');
    const call = stack.ipc(session, 'tool.invoke.delete_everything', { target: 'via-api' });
    let list: { id: string; tool: string; group: string }[] = [];
    for (let i = 0; i < 200 && list.length === 0; i++) {
      list = ((await (await fetch(`${base}/confirmations`, { headers: auth })).json()) as { pending: typeof list }).pending;
    }
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ tool: 'delete_everything', group: 'family' });
    const approved = await fetch(`${base}/confirmations/${list[0].id}/approve`, { method: 'POST', headers: auth });
    expect(approved.status).toBe(200);
    const r = await call;
    expect(r.out).toEqual({ deleted: 'via-api' });
    const again = await fetch(`${base}/confirmations/${list[0].id}/deny`, { method: 'POST', headers: auth });
    expect(again.status).toBe(404);
  });
});
