// The web chat channel end to end, without a browser: the real core, the plugin host
// serving the webchat plugin's panel on its unix socket, the console's proxy in front
// of it, and the real ipc binary for the agent's side. (The browser and a real agent
// container: docker/console-appliance.)
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { eventually, ROOT, Stack, until } from '../harness.js';

const TOKEN = 'webchat-admin-token-0123456789';
let stack: Stack;
let admin: FastifyInstance;
let base: string;
let cookie: string;
let csrf: string;
const events: EventEnvelope[] = [];

beforeAll(async () => {
  stack = await Stack.start({ plugins: [], extraPluginDirs: { webchat: join(ROOT, 'plugins/webchat') }, config: { groups: { family: {} } } });
  stack.core.on('event', (e) => events.push(e));
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
    console: { panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })) },
  });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
  cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  csrf = ((await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string }).token;
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
});

const send = (text: string, group = 'family') =>
  fetch(`${base}/plugins/webchat/api/send?group=${group}`, { method: 'POST', headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
const history = async (group = 'family') => ((await (await fetch(`${base}/plugins/webchat/api/history?group=${group}`, { headers: { cookie } })).json()) as { messages: { from: string; text: string }[] }).messages;

describe('web chat', () => {
  it('is a healthy plugin with a panel on a private socket', () => {
    expect(stack.core.catalog.state('webchat')).toBe('healthy');
    expect(stack.core.catalog.panels()).toEqual([{ name: 'webchat', title: 'Web chat', down: null }]);
    const socket = join(stack.runDir, SOCKETS.panels, 'webchat.sock');
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(stack.runDir, SOCKETS.panels)).mode & 0o777).toBe(0o700);
  });

  it('serves its page through the console, with the console\'s CSP', async () => {
    const page = await fetch(`${base}/plugins/webchat/`, { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('src="./chat.js"');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('what the person writes becomes message.inbound for the group, like a Telegram message', async () => {
    const res = await send('what is on my list?');
    expect(res.status).toBe(202);
    const event = await until(() => events.find((e) => e.topic === 'message.inbound' && e.payload.body === 'what is on my list?'));
    expect(event).toMatchObject({ group: 'family', source: 'webchat', payload: { channel: 'webchat', sender: 'console', content_type: 'text' } });
    expect((await history()).at(-1)).toMatchObject({ from: 'user', text: 'what is on my list?' });
  });

  it('the agent answers with send_webchat through the pipeline; the page\'s stream gets it', async () => {
    const controller = new AbortController();
    const stream = await fetch(`${base}/plugins/webchat/api/stream?group=family`, { headers: { cookie }, signal: controller.signal });
    const reader = stream.body!.getReader();
    const session = await stack.openSession('family');
    const r = await stack.ipc(session, 'tool.invoke.send_webchat', { recipient: 'console', body: 'Milk and eggs.' });
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({ delivered: true });
    let text = '';
    while (!text.includes('Milk and eggs.')) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    expect((await history()).at(-1)).toMatchObject({ from: 'agent', text: 'Milk and eggs.' });
    const wrong = await stack.ipc(session, 'tool.invoke.send_webchat', { recipient: 'someone-else', body: 'x' });
    expect(wrong.code).not.toBe(0);
    await stack.core.closeSession(session.id);
  });

  it('a pause longer than the proxy\'s 10 s: the stream stays open and the second message is accepted (issue 20: it got 403 CSRF_REFUSED)', async () => {
    // A fresh login, as in the browser: the page opens its stream before it has a CSRF token.
    const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
    const fresh = (login.headers.get('set-cookie') ?? '').split(';')[0];
    const stream = await fetch(`${base}/plugins/webchat/api/stream?group=pause`, { headers: { cookie: fresh } });
    const reader = stream.body!.getReader();
    let text = '';
    let ended = false;
    void (async () => {
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return void (ended = true);
        text += new TextDecoder().decode(value);
      }
    })();
    const token = ((await (await fetch(`${base}/api/csrf`, { headers: { cookie: fresh } })).json()) as { token: string }).token;
    const post = (body: string) => fetch(`${base}/plugins/webchat/api/send?group=pause`, { method: 'POST', headers: { cookie: fresh, 'x-csrf-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ text: body }) });
    expect((await post('first')).status).toBe(202);
    await new Promise((r) => setTimeout(r, 11_000));
    const second = await post('second, after a pause');
    expect([second.status, await second.text()]).toEqual([202, expect.stringContaining('"id"')]);
    expect(ended).toBe(false);
    await until(() => text.includes('second, after a pause'), 5000);
    await reader.cancel();
  }, 30_000);

  it('a page that reconnects gets what it missed, once: Last-Event-ID or since', async () => {
    const ids: string[] = [];
    for (const body of ['one', 'two', 'three']) ids.push(((await (await send(body, 'resume')).json()) as { id: string }).id);
    const read = async (headers: Record<string, string>, query = '') => {
      const controller = new AbortController();
      const res = await fetch(`${base}/plugins/webchat/api/stream?group=resume${query}`, { headers: { cookie, ...headers }, signal: controller.signal });
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const reader = res.body!.getReader();
      let text = '';
      const deadline = Date.now() + 1500;
      while (Date.now() < deadline && !text.includes('three')) {
        const chunk = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), 300))]);
        if (chunk?.value) text += new TextDecoder().decode(chunk.value);
      }
      controller.abort();
      return text;
    };
    const afterFirst = await read({ 'last-event-id': ids[0] });
    expect(afterFirst).not.toContain('"one"');
    expect(afterFirst).toContain(`id: ${ids[1]}`);
    expect(afterFirst).toContain('three');
    const afterSecond = await read({}, `&since=${ids[1]}`);
    expect(afterSecond).not.toContain('"two"');
    expect(afterSecond).toContain('three');
    // An id it no longer has: everything kept (the page skips what it has by id).
    expect(await read({}, '&since=start')).toContain('"one"');
  });

  it('shows the agent\'s errors instead of swallowing them', async () => {
    stack.core.publish('agent.error', 'family', { reason: 'timeout' });
    const notice = await eventually(async () => (await history()).find((m) => m.from === 'notice'));
    expect(notice.text).toContain('timeout');
  });

  it('refuses bad input with a clear error: no text, too much, a bad group, not JSON', async () => {
    expect((await send('')).status).toBe(400);
    expect((await send('x'.repeat(8001))).status).toBe(400);
    expect((await send('hi', '../etc')).status).toBe(400);
    const notJson = await fetch(`${base}/plugins/webchat/api/send?group=family`, { method: 'POST', headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'text/plain' }, body: 'hello' });
    expect(notJson.status).toBe(400);
  });

  it('keeps the conversation across a plugin host restart (kill -9)', async () => {
    await new Promise((r) => setTimeout(r, 400)); // the history is written a moment after a change
    await stack.killHost();
    stack.startHost();
    await until(() => (stack.core.catalog.state('webchat') === 'healthy' ? true : undefined), 15_000);
    const after = await eventually(async () => {
      const messages = await history();
      return messages.length > 0 ? messages : undefined;
    });
    expect(after.map((m) => m.text)).toEqual(expect.arrayContaining(['what is on my list?', 'Milk and eggs.']));
  });
});
