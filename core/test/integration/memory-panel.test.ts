// The memory plugin's console page, over real HTTP through the console: the real core,
// the plugin host serving the panel, memories stored by a real ipc call. Search, read
// with provenance, delete (audited by the core), and bad input refused.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { Session } from '../../src/boundary/session-table.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { ROOT, Stack } from '../harness.js';

const TOKEN = 'memory-panel-token-0123456789';
let stack: Stack;
let admin: FastifyInstance;
let base: string;
let cookie: string;
let csrf: string;
let session: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: [], extraPluginDirs: { memory: join(ROOT, 'plugins/memory') }, config: { groups: { family: {} } } });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
    console: { panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })) },
  });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
  cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  csrf = ((await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string }).token;
  session = await stack.openSession('family');
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
});

const get = async (path: string) => {
  const res = await fetch(`${base}/plugins/memory${path}`, { headers: { cookie } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

describe('the memory page', () => {
  it('is a panel of the memory plugin', () => {
    expect(stack.core.catalog.panels()).toContainEqual({ name: 'memory', title: 'Memory', down: null });
  });

  it('finds what the agent stored, and shows where each entry came from', async () => {
    const stored = await stack.ipc(session, 'tool.invoke.memory_store', { type: 'preference', content: 'Oat milk, never cow milk', tags: ['food'] });
    expect(stored.code).toBe(0);
    await stack.ipc(session, 'tool.invoke.memory_store', { type: 'fact', content: 'The dog is called Rex' });
    const { body: found } = await get('/api/search?group=family&q=milk');
    expect(found.results.map((r: { content: string }) => r.content)).toEqual(['Oat milk, never cow milk']);
    const id = found.results[0].id as string;
    const { body: read } = await get(`/api/entry?group=family&id=${id}`);
    expect(read.entry).toMatchObject({ id, type: 'preference', behavioral: true, provenance: { session_id: session.id, group: 'family' } });
    // The call that stored it: its trail is one click away in Activity.
    const trail = stack.core.audit.query({ correlation: read.entry.provenance.correlation });
    expect(trail.some((e) => e.topic === 'tool.invoke.memory_store' && e.stage === 'response')).toBe(true);
  });

  it('deletes an entry only with the CSRF token; the agent then no longer finds it; the core audits it', async () => {
    const { body: found } = await get('/api/search?group=family&q=Rex');
    const id = found.results[0].id as string;
    const post = (headers: Record<string, string>) => fetch(`${base}/plugins/memory/api/delete?group=family`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', ...headers }, body: JSON.stringify({ id }) });
    expect((await post({})).status).toBe(403);
    expect((await get(`/api/entry?group=family&id=${id}`)).status).toBe(200);
    expect((await post({ 'x-csrf-token': csrf })).status).toBe(200);
    const search = await stack.ipc(session, 'tool.invoke.memory_search', { query: 'Rex' });
    expect(search.out).toEqual({ results: [] });
    const audited = stack.core.audit.query({ group: 'family' }).filter((e) => e.source === 'console' && e.reason?.startsWith('POST memory page /api/delete'));
    expect(audited.map((e) => e.outcome)).toEqual(['rejected', 'ok']);
  });

  it('refuses bad input clearly: a bad group, an unknown id, no id', async () => {
    expect((await get('/api/search?group=../../etc')).status).toBe(400);
    expect((await get('/api/entry?group=family&id=nope')).status).toBe(404);
    const noId = await fetch(`${base}/plugins/memory/api/delete?group=family`, { method: 'POST', headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' }, body: '{}' });
    expect(noId.status).toBe(400);
    expect((await get('/api/search?group=nobody')).body).toEqual({ results: [] });
  });
});
