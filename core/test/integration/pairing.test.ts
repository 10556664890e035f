// Pairing, closed by default, end to end: the real core and plugin host, the Telegram
// plugin against a Bot API stand-in, and the admin API. A stranger's chat gets a code and
// never reaches an agent; the owner's approval writes carapace.json (atomically, with a
// backup, keeping a hand edit) and takes effect for the next message without a restart.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';
import { ROOT, Stack, until } from '../harness.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const TOKEN = '123456789:AAH-test_token-0123456789abcdefghijk';
const ADMIN = 'pairing-admin-token-0123456789';
const MAIN_CHAT = 100;
let tg: TelegramStandIn;
let stack: Stack;
let admin: FastifyInstance;
let base: string;
const events: EventEnvelope[] = [];
const inbound = (body: string) => events.filter((e) => e.topic === 'message.inbound' && e.payload.body === body);
const auth = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
const codeIn = (text: string) => /code ([A-Z2-9]{6})/.exec(text)?.[1];
const configOnDisk = () => JSON.parse(readFileSync(stack.configFile, 'utf8')) as { groups: Record<string, unknown>; plugins: { telegram: { chats: Record<string, string> } }; rate_limit?: unknown };

async function approve(code: string, body: unknown): Promise<Response> {
  return fetch(`${base}/pairing/${code}/approve`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
}

/** A stranger writes; the code the bot answered with. */
async function strangerWrites(chatId: number, text: string): Promise<string> {
  tg.queueMessage({ chatId, text, fromId: chatId });
  const reply = await until(() => tg.sentTo(chatId).find((m) => codeIn(m.text)));
  return codeIn(reply.text)!;
}

beforeAll(async () => {
  tg = await TelegramStandIn.start(TOKEN);
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: TOKEN },
    config: { groups: { main: {} }, plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(MAIN_CHAT)]: 'main' }, owners: [], poll_timeout_s: 1 } } },
  });
  stack.core.on('event', (e) => events.push(e));
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, ADMIN);
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await admin?.close();
  await stack?.stop();
  await tg?.close();
});

describe('pairing', () => {
  it('a stranger gets one reply with a code, once, and never reaches an agent', async () => {
    const code = await strangerWrites(500, 'hello, who are you?');
    tg.queueMessage({ chatId: 500, text: 'hello again', fromId: 500 });
    tg.queueMessage({ chatId: MAIN_CHAT, text: 'marker after the stranger', fromId: 1 });
    await until(() => inbound('marker after the stranger')[0]);
    expect(tg.sentTo(500)).toHaveLength(1);
    expect(inbound('hello, who are you?')).toHaveLength(0);
    expect(inbound('hello again')).toHaveLength(0);
    const { pending } = (await (await fetch(`${base}/pairing`, { headers: auth })).json()) as { pending: { code: string; chat: string; plugin: string; text: string }[] };
    expect(pending).toEqual([expect.objectContaining({ code, chat: '500', plugin: 'telegram', text: 'hello, who are you?' })]);
    expect(stack.core.audit.query({}).some((e) => e.reason?.includes(`code ${code}`) && e.outcome === 'pending')).toBe(true);
  });

  it('a forged code is 404; approval into a new group writes carapace.json with a backup and works without a restart', async () => {
    const code = stack.core.pairing.list().find((r) => r.chat === '500')!.code;
    expect((await approve('ZZZZZZ', { group: 'friends', create: true })).status).toBe(404);
    expect((await approve(code, { group: 'friends' })).status).toBe(404); // no such group, and not asked to make it
    const before = readFileSync(stack.configFile, 'utf8');
    const res = await approve(code, { group: 'friends', create: true });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ chat: '500', group: 'friends', plugin: 'telegram' });
    expect(configOnDisk().plugins.telegram.chats).toEqual({ [String(MAIN_CHAT)]: 'main', '500': 'friends' });
    expect(configOnDisk().groups).toHaveProperty('friends');
    expect(readFileSync(`${stack.configFile}.bak`, 'utf8')).toBe(before);
    // The placeholder stays a placeholder: the secret is never written into the file.
    expect(readFileSync(stack.configFile, 'utf8')).toContain('${TELEGRAM_BOT_TOKEN}');
    expect(readFileSync(stack.configFile, 'utf8')).not.toContain(TOKEN);
    await until(() => tg.sentTo(500).find((m) => m.text.startsWith('Connected')));
    tg.queueMessage({ chatId: 500, text: 'now I may talk', fromId: 500 });
    expect((await until(() => inbound('now I may talk')[0])).group).toBe('friends');
    // The same code twice: the second finds nothing.
    expect((await approve(code, { group: 'friends', create: true })).status).toBe(404);
  });

  it('keeps a hand edit made meanwhile, and refuses (touching nothing) while the file does not parse', async () => {
    const code = await strangerWrites(600, 'second stranger');
    const edited = configOnDisk();
    edited.rate_limit = { per_minute: 77, burst: 7 };
    writeFileSync(stack.configFile, JSON.stringify(edited, null, 2));
    writeFileSync(stack.configFile, '{ "groups": { "main": {} ,,, ');
    const broken = await approve(code, { group: 'main' });
    expect(broken.status).toBe(409);
    expect(((await broken.json()) as { code: string }).code).toBe('CONFIG_INVALID');
    expect(readFileSync(stack.configFile, 'utf8')).toBe('{ "groups": { "main": {} ,,, ');
    writeFileSync(stack.configFile, JSON.stringify(edited, null, 2));
    expect((await approve(code, { group: 'main' })).status).toBe(200);
    expect(configOnDisk().rate_limit).toEqual({ per_minute: 77, burst: 7 });
    expect(configOnDisk().plugins.telegram.chats['600']).toBe('main');
  });

  it('a refused chat is not asked about again; a flood of strangers leaves at most 50 waiting', async () => {
    const code = await strangerWrites(700, 'spam');
    const res = await fetch(`${base}/pairing/${code}/deny`, { method: 'POST', headers: auth, body: '{}' });
    expect(res.status).toBe(200);
    expect(stack.core.pairing.request('telegram', '700', {})).toBeNull();
    for (let chat = 10_000; chat < 10_080; chat++) tg.queueMessage({ chatId: chat, text: `flood ${chat}`, fromId: chat });
    await until(() => (tg.sentTo(10_079).length > 0 ? true : undefined), 30_000);
    expect(stack.core.pairing.list().length).toBeLessThanOrEqual(50);
    expect(stack.core.pairing.list().some((r) => r.chat === '10079')).toBe(true);
    for (let chat = 10_000; chat < 10_080; chat++) expect(tg.sentTo(chat).length).toBeLessThanOrEqual(1);
  }, 60_000); // above its own 30 s wait, so that a slow run fails with the condition, not jest's timeout
});
