// Files to Telegram (send_telegram's `file`): the real core reads the agent's file (here
// from a folder standing in for the agent's container; docker/agent-files reads a real
// one), keeps it, and hands the plugin a FileRef; the Telegram plugin, in its own process,
// gets the bytes through the core's readFile service and uploads them as the Bot API takes
// them (multipart/form-data, parsed by the stand-in as Telegram would). A hostile plugin
// asking for a kept file by its id is refused and audited.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Session } from '../../src/boundary/session-table.js';
import { FileStore } from '../../src/files/file-store.js';
import { ROOT, Stack } from '../harness.js';
import { expectError, expectOk } from '../support/expect-ipc.js';
import { TelegramStandIn } from '../support/telegram-standin.js';

const TOKEN = '123456789:AAH-files_token-0123456789abcdefghijk';
const CHAT = 300;
// A 1x1 PNG; a one-page PDF's first bytes are enough for the core's kind check.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

let tg: TelegramStandIn;
let stack: Stack;
let session: Session;
/** The agent's workspace, as the stand-in reader has it. */
const workspace = mkdtempSync(join(tmpdir(), 'tg-files-'));

beforeAll(async () => {
  tg = await TelegramStandIn.start(TOKEN);
  stack = await Stack.start({
    plugins: ['snoop'],
    extraPluginDirs: { telegram: join(ROOT, 'plugins/telegram') },
    env: { TELEGRAM_BOT_TOKEN: TOKEN },
    config: { groups: { main: {} }, plugins: { snoop: { token: 'snoop-token' }, telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: tg.url, chats: { [String(CHAT)]: 'main' }, poll_timeout_s: 5 } } },
  });
  // The engine's archive read stands in as a read of this folder: the file checks after it are the core's own.
  stack.core.acceptFiles({
    read: async (_container, path, max) => {
      try {
        const bytes = readFileSync(join(workspace, basename(path)));
        return bytes.length > max ? { ok: false, why: 'too_large' } : { ok: true, bytes };
      } catch {
        return { ok: false, why: 'not_found' };
      }
    },
    store: new FileStore(join(stack.dir, 'files')),
  });
  session = await stack.openSession('main');
  stack.core.sessions.setContainer(session.id, 'agent-container');
  writeFileSync(join(workspace, 'chart.png'), PNG);
  writeFileSync(join(workspace, 'report.pdf'), PDF);
  writeFileSync(join(workspace, 'tool.bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3]));
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await tg?.close();
});

const send = (args: Record<string, unknown>) => stack.ipc(session, 'tool.invoke.send_telegram', { recipient: String(CHAT), ...args });

describe('send_telegram with a file', () => {
  it('a PNG arrives as a photo, the body its caption, the bytes exactly the file', async () => {
    const out = expectOk(await send({ body: 'Your spending by month.', file: 'chart.png' }));
    const photo = tg.files.at(-1)!;
    expect(photo).toMatchObject({ method: 'sendPhoto', chat_id: String(CHAT), caption: 'Your spending by month.', name: 'chart.png', type: 'image/png' });
    expect(photo.bytes.equals(PNG)).toBe(true);
    expect(out).toEqual({ message_ids: [photo.message_id], chunks: 1, file: { name: 'chart.png', size: PNG.length, type: 'image/png' } });
    expect(tg.sentTo(CHAT)).toEqual([]);
  });

  it('a file a session sent after reading external content comes back labelled in the chat history, caption and all', async () => {
    const labelled = await stack.openSession('main');
    stack.core.sessions.setContainer(labelled.id, 'agent-container');
    stack.core.sessions.markUntrustedInput(labelled.id);
    const out = expectOk(await stack.ipc(labelled, 'tool.invoke.send_telegram', { recipient: String(CHAT), body: 'As the mail asked.', file: 'chart.png' }));
    const reader = await stack.openSession('main');
    const r = expectOk(await stack.ipc(reader, 'tool.invoke.get_telegram_history', { chat_id: String(CHAT), limit: 1 }));
    expect(r.messages).toEqual([expect.objectContaining({ message_id: out.message_ids[0], from: 'bot', external: true })]);
    expect(r.messages[0].text).toContain('As the mail asked.');
    expect(r.external_content).toBe(true);
  });

  it('a PDF goes as a document; a body over a caption\'s 1024 characters goes first, as text', async () => {
    const body = 'The report. '.repeat(100);
    const out = expectOk(await send({ body, file: 'report.pdf' }));
    const doc = tg.files.at(-1)!;
    expect(doc).toMatchObject({ method: 'sendDocument', caption: undefined, name: 'report.pdf', type: 'application/pdf' });
    expect(doc.bytes.equals(PDF)).toBe(true);
    const text = tg.sentTo(CHAT).at(-1)!;
    expect(text.text).toBe(body);
    expect(out.message_ids).toEqual([text.message_id, doc.message_id]);
  });

  it('a picture Telegram will not take as a photo still arrives, as a document', async () => {
    tg.refusePhotos = 1;
    const out = expectOk(await send({ body: 'A tall chart.', file: 'chart.png' }));
    const doc = tg.files.at(-1)!;
    expect(doc).toMatchObject({ method: 'sendDocument', caption: 'A tall chart.', name: 'chart.png' });
    expect(out.message_ids).toEqual([doc.message_id]);
  });

  it('a photo of nearly 10 MB (the most a file argument may be) arrives whole, and the plugin goes on', async () => {
    const big = Buffer.concat([PNG.subarray(0, 16), randomBytes(10 * 1024 * 1024 - 64)]);
    writeFileSync(join(workspace, 'big.png'), big);
    const out = expectOk(await send({ body: 'A big one.', file: 'big.png' }));
    const photo = tg.files.at(-1)!;
    expect(photo).toMatchObject({ method: 'sendPhoto', name: 'big.png' });
    expect(photo.bytes.equals(big)).toBe(true);
    expect(out.message_ids).toEqual([photo.message_id]);
    expectOk(await send({ body: 'still here' }));
    expect(stack.core.catalog.state('telegram')).toBe('healthy');
  }, 60_000);

  it('a file of a kind no person can open is refused by the core before anything is sent', async () => {
    const before = tg.files.length;
    expectError(await send({ body: 'x', file: 'tool.bin' }), 'VALIDATION_FAILED', { field: 'file' });
    expect(tg.files).toHaveLength(before);
  });
});

describe('a plugin asking the core for a kept file', () => {
  it('is refused for any file its own request did not hand it, and audited', async () => {
    expectOk(await send({ body: 'one more', file: 'chart.png' }));
    const routed = stack.core.audit.query({ session: session.id, last_n: 40 }).reverse().find((e) => e.stage === 'route' && e.reason?.includes('files:'));
    const id = /[0-9a-f]{8}-[0-9a-f-]{27}/.exec(routed?.reason ?? '')?.[0];
    expect(id).toBeDefined();
    const r = expectOk(await stack.ipc(session, 'tool.invoke.read_kept_file', { id }));
    expect(r).toEqual({ ok: false, code: 'UNAUTHORIZED' });
    expect(stack.core.audit.query({ outcome: 'rejected', last_n: 20 }).map((e) => e.reason)).toContainEqual(expect.stringContaining('readFile refused: that file was not given to this request'));
  });
});
