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
    // How it ended, as the core knows it; a request of a run before a restart: that it went with it.
    expect(((await again.json()) as { message: string }).message).toBe('Already answered: approved by admin-api.');
    const earlier = await fetch(`${base}/confirmations/6f1c2d3e-0000-4000-8000-000000000000/approve`, { method: 'POST', headers: auth });
    expect(earlier.status).toBe(404);
    expect(((await earlier.json()) as { message: string }).message).toBe('This request ended when Carapace restarted; nothing ran.');
  });

  it('serves Prometheus metrics behind the token: requests by tool and outcome, latency, pending confirmations, plugins, audit, the process', async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const session = await stack.openSession('metrics');
    expect((await stack.ipc(session, 'tool.invoke.get_session_info', {})).code).toBe(0);
    for (let i = 0; i < 3; i++) expect((await stack.ipc(session, `tool.invoke.made_up_${i}`, {})).err?.code).toBe('UNKNOWN_TOOL');
    const pending = stack.ipc(session, 'tool.invoke.delete_everything', { target: 'metrics' });
    await stack.pendingConfirmation('metrics', (p) => p.tool === 'delete_everything');
    const r = await fetch(`${base}/metrics`, { headers: auth });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    const text = await r.text();
    const value = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('carapace_requests_total{tool="get_session_info",outcome="ok"}')).toBeGreaterThanOrEqual(1);
    // Whatever an agent makes up, one label: the series cannot be multiplied from outside.
    expect(value('carapace_requests_total{tool="unknown",outcome="UNKNOWN_TOOL"}')).toBe(3);
    expect(text).not.toContain('made_up');
    expect(value('carapace_pipeline_duration_seconds_count{tool="get_session_info"}')).toBeGreaterThanOrEqual(1);
    expect(value('carapace_confirmations_pending')).toBe(1);
    expect(value('carapace_plugin_healthy{plugin="guarded"}')).toBe(1);
    expect(value('carapace_audit_writable')).toBe(1);
    expect(value('process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    stack.core.confirmations.denyAll('test');
    await pending;
  });
});
