// A Telegram Bot API stand-in for tests: an HTTP server on 127.0.0.1 that speaks the
// real API's JSON at /bot<token>/<method>. Updates stay queued until a getUpdates with a
// higher offset confirms them, as on Telegram; getUpdates long-polls.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StandInUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  username?: string;
}

export interface StandInMessage {
  message_id: number;
  date: number;
  chat: { id: number; type: string };
  from?: StandInUser;
  text?: string;
  caption?: string;
  reply_markup?: unknown;
}

export interface StandInUpdate {
  update_id: number;
  message?: StandInMessage;
  callback_query?: { id: string; from: StandInUser; message?: StandInMessage; chat_instance: string; data?: string };
}

export interface SentMessage {
  chat_id: string;
  message_id: number;
  text: string;
  reply_markup?: { inline_keyboard?: { text: string; callback_data?: string }[][] };
}

/** A file as Telegram received it (sendPhoto, sendDocument: multipart/form-data). */
export interface SentFile {
  method: 'sendPhoto' | 'sendDocument';
  chat_id: string;
  message_id: number;
  caption: string | undefined;
  name: string;
  type: string;
  bytes: Buffer;
}

export interface ApiCall {
  method: string;
  params: Record<string, any>;
  status: number;
  at: number;
}

interface Waiter {
  offset: number;
  limit: number;
  res: ServerResponse;
  timer: NodeJS.Timeout;
}

const BOT: StandInUser = { id: 7000001, is_bot: true, first_name: 'Carapace Test', username: 'carapace_test_bot' };
export const TEXT_LIMIT = 4096;

export class TelegramStandIn {
  readonly sent: SentMessage[] = [];
  readonly files: SentFile[] = [];
  /** getMe calls that have arrived (answered or not), and how long each waits for its answer. */
  getMeAsked = 0;
  getMeDelayMs = 0;
  /** The next this many sendPhoto calls are refused as Telegram refuses a picture of odd sides. */
  refusePhotos = 0;
  readonly edits: { chat_id: string; message_id: number; text: string; reply_markup?: unknown }[] = [];
  readonly callbackAnswers: { callback_query_id: string; text?: string }[] = [];
  readonly calls: ApiCall[] = [];
  /** Update ids some getUpdates has returned (the bot has seen them; it may not have confirmed them). */
  readonly handedOut = new Set<number>();
  private updates: StandInUpdate[] = [];
  private nextUpdateId = 500;
  private readonly nextMessageId = new Map<string, number>();
  private readonly messages = new Map<string, StandInMessage>();
  private waiter: Waiter | null = null;
  private rateLimited = 0;
  private held = 0;
  private holdMs = 0;
  /** sendMessage calls answered late (holdNextSends) that have arrived so far. */
  heldSends = 0;
  /** Held sendMessage calls whose caller hung up before the answer (nothing is sent for those). */
  cutOffSends = 0;
  private retryAfter = 1;
  private callbackSeq = 0;
  private server!: Server;
  url = '';

  private constructor(readonly token: string) {}

  static async start(token: string, host = '127.0.0.1'): Promise<TelegramStandIn> {
    const standIn = new TelegramStandIn(token);
    standIn.server = createServer((req, res) => void standIn.handle(req, res));
    await new Promise<void>((resolve) => standIn.server.listen(0, host, resolve));
    standIn.url = `http://${host}:${(standIn.server.address() as AddressInfo).port}`;
    return standIn;
  }

  async close(): Promise<void> {
    this.release(409, 'Conflict: server closing');
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- test helpers --------------------------------------------------------------------

  /** A user writes `text` in `chatId`. Returns the ids Telegram assigned. */
  queueMessage(opts: { chatId: number | string; text: string; fromId?: number; chatType?: string; fromIsBot?: boolean }): { update_id: number; message_id: number } {
    const message = this.newMessage(String(opts.chatId), opts.chatType, {
      from: { id: opts.fromId ?? 42, is_bot: opts.fromIsBot ?? false, first_name: `User ${opts.fromId ?? 42}` },
      text: opts.text,
    });
    const update_id = this.push({ message });
    return { update_id, message_id: message.message_id };
  }

  /** A user presses an inline button with `data` under message `messageId` in `chatId`. */
  queueCallback(opts: { chatId: number | string; messageId: number; fromId: number; data: string }): { update_id: number; id: string } {
    const id = `cbq-${++this.callbackSeq}`;
    const message = this.messages.get(`${opts.chatId}/${opts.messageId}`) ?? { message_id: opts.messageId, date: now(), chat: { id: Number(opts.chatId), type: 'private' } };
    const update_id = this.push({
      callback_query: { id, from: { id: opts.fromId, is_bot: false, first_name: `User ${opts.fromId}`, username: `user${opts.fromId}` }, message, chat_instance: `ci-${opts.chatId}`, data: opts.data },
    });
    return { update_id, id };
  }

  /** The next `count` sendMessage calls are answered (normally) only after `ms`: a slow Telegram. */
  holdNextSends(count: number, ms: number): void {
    this.held = count;
    this.holdMs = ms;
  }

  /** The next `count` sendMessage calls answer 429 with parameters.retry_after. */
  rateLimitNextSends(count: number, retryAfter = 1): void {
    this.rateLimited = count;
    this.retryAfter = retryAfter;
  }

  sentTo(chatId: number | string): SentMessage[] {
    return this.sent.filter((m) => m.chat_id === String(chatId));
  }

  callsOf(method: string): ApiCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Updates Telegram still holds (not yet confirmed by a getUpdates offset). */
  pendingUpdates(): StandInUpdate[] {
    return [...this.updates];
  }

  // ---- the API ---------------------------------------------------------------------------

  private push(update: Omit<StandInUpdate, 'update_id'>): number {
    const update_id = this.nextUpdateId++;
    this.updates.push({ update_id, ...update });
    const waiter = this.waiter;
    if (waiter) {
      const ready = this.deliverable(waiter.offset, waiter.limit);
      if (ready.length > 0) {
        this.waiter = null;
        clearTimeout(waiter.timer);
        this.reply(waiter.res, 200, { ok: true, result: ready });
      }
    }
    return update_id;
  }

  private newMessage(chatId: string, chatType = 'private', extra: Partial<StandInMessage>): StandInMessage {
    const id = this.nextMessageId.get(chatId) ?? 1;
    this.nextMessageId.set(chatId, id + 1);
    const message: StandInMessage = { message_id: id, date: now(), chat: { id: Number(chatId), type: chatType }, ...extra };
    this.messages.set(`${chatId}/${id}`, message);
    return message;
  }

  private deliverable(offset: number, limit: number): StandInUpdate[] {
    const ready = this.updates.filter((u) => offset < 0 || u.update_id >= offset).slice(0, limit);
    for (const u of ready) this.handedOut.add(u.update_id);
    return ready;
  }

  private release(code: number, description: string): void {
    const waiter = this.waiter;
    if (!waiter) return;
    this.waiter = null;
    clearTimeout(waiter.timer);
    this.reply(waiter.res, code, { ok: false, error_code: code, description });
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    if (res.writableEnded || res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://standin');
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    let params: Record<string, any> = Object.fromEntries(url.searchParams);
    const raw = Buffer.concat(chunks).toString('utf8');
    let upload: File | null = null;
    if (/^multipart\/form-data/.test(req.headers['content-type'] ?? '')) {
      // As Telegram reads an upload: fields and one file, parsed by undici's own FormData.
      const form = await new Response(Buffer.concat(chunks), { headers: { 'content-type': req.headers['content-type']! } }).formData();
      for (const [key, value] of form) {
        if (typeof value === 'string') params[key] = value;
        else upload = value;
      }
    } else if (raw) {
      try {
        params = { ...params, ...(JSON.parse(raw) as Record<string, any>) };
      } catch {
        params = { ...params, ...Object.fromEntries(new URLSearchParams(raw)) };
      }
    }
    const method = match?.[2] ?? '';
    const respond = (status: number, body: unknown): void => {
      this.calls.push({ method, params, status, at: Date.now() });
      this.reply(res, status, body);
    };
    const fail = (status: number, description: string, extra: Record<string, unknown> = {}): void =>
      respond(status, { ok: false, error_code: status, description, ...extra });
    if (!match) return fail(404, 'Not Found');
    if (decodeURIComponent(match[1]) !== this.token) return fail(401, 'Unauthorized');

    switch (method) {
      case 'getMe':
        // A slow Telegram at start-up: the plugin is still starting meanwhile.
        this.getMeAsked++;
        if (this.getMeDelayMs > 0) await new Promise((r) => setTimeout(r, this.getMeDelayMs));
        return respond(200, { ok: true, result: { ...BOT, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false } });
      case 'getUpdates': {
        const offset = Number(params.offset ?? 0);
        const limit = Math.min(100, Math.max(1, Number(params.limit ?? 100)));
        const timeout = Math.max(0, Number(params.timeout ?? 0));
        // As on Telegram: an offset confirms every update before it; a negative one keeps
        // only the last -offset updates and forgets the rest.
        if (offset > 0) this.updates = this.updates.filter((u) => u.update_id >= offset);
        if (offset < 0) this.updates = this.updates.slice(offset);
        // A newer getUpdates ends an older one that is still waiting.
        this.release(409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running');
        this.calls.push({ method, params, status: 200, at: Date.now() });
        const ready = this.deliverable(offset, limit);
        if (ready.length > 0 || timeout === 0) return this.reply(res, 200, { ok: true, result: ready });
        const waiter: Waiter = {
          offset,
          limit,
          res,
          timer: setTimeout(() => {
            if (this.waiter === waiter) this.waiter = null;
            this.reply(res, 200, { ok: true, result: [] });
          }, timeout * 1000),
        };
        this.waiter = waiter;
        res.on('close', () => {
          if (this.waiter === waiter) {
            this.waiter = null;
            clearTimeout(waiter.timer);
          }
        });
        return;
      }
      case 'sendMessage': {
        const chatId = params.chat_id === undefined ? '' : String(params.chat_id);
        const text = typeof params.text === 'string' ? params.text : '';
        if (!chatId) return fail(400, 'Bad Request: chat_id is empty');
        if (!/^-?\d+$/.test(chatId)) return fail(400, 'Bad Request: chat not found');
        if (text.trim() === '') return fail(400, 'Bad Request: message text is empty');
        if (text.length > TEXT_LIMIT) return fail(400, 'Bad Request: message is too long');
        const deliver = (markup: unknown) => {
          const message = this.newMessage(chatId, 'private', { from: BOT, text, ...(markup ? { reply_markup: markup } : {}) });
          this.sent.push({ chat_id: chatId, message_id: message.message_id, text, reply_markup: params.reply_markup });
          return message;
        };
        if (this.held > 0) {
          this.held--;
          this.heldSends++;
          let cutOff = false;
          res.once('close', () => {
            if (res.writableEnded) return;
            cutOff = true;
            this.cutOffSends++;
          });
          await new Promise((r) => setTimeout(r, this.holdMs));
          // As on Telegram: a request it has read is carried out, whether or not the client waits for the answer.
          if (cutOff) return void deliver(params.reply_markup);
        }
        if (this.rateLimited > 0) {
          this.rateLimited--;
          return fail(429, `Too Many Requests: retry after ${this.retryAfter}`, { parameters: { retry_after: this.retryAfter } });
        }
        return respond(200, { ok: true, result: deliver(params.reply_markup) });
      }
      case 'sendPhoto':
      case 'sendDocument': {
        const chatId = String(params.chat_id ?? '');
        const field = method === 'sendPhoto' ? 'photo' : 'document';
        if (!/^-?\d+$/.test(chatId)) return fail(400, 'Bad Request: chat not found');
        if (!upload) return fail(400, `Bad Request: there is no ${field} in the request`);
        if (typeof params.caption === 'string' && params.caption.length > 1024) return fail(400, 'Bad Request: message caption is too long');
        if (method === 'sendPhoto' && this.refusePhotos > 0) {
          this.refusePhotos--;
          return fail(400, 'Bad Request: PHOTO_INVALID_DIMENSIONS');
        }
        const bytes = Buffer.from(await upload.arrayBuffer());
        const message = this.newMessage(chatId, 'private', { from: BOT, ...(params.caption ? { caption: params.caption } : {}) });
        this.files.push({ method, chat_id: chatId, message_id: message.message_id, caption: params.caption, name: upload.name, type: upload.type, bytes });
        return respond(200, { ok: true, result: message });
      }
      case 'answerCallbackQuery':
        if (typeof params.callback_query_id !== 'string') return fail(400, 'Bad Request: query is too old and response timeout expired or query ID is invalid');
        this.callbackAnswers.push({ callback_query_id: params.callback_query_id, text: params.text });
        return respond(200, { ok: true, result: true });
      case 'editMessageText': {
        const key = `${String(params.chat_id)}/${Number(params.message_id)}`;
        const message = this.messages.get(key);
        if (!message) return fail(400, 'Bad Request: message to edit not found');
        message.text = String(params.text ?? '');
        if (params.reply_markup) message.reply_markup = params.reply_markup;
        else delete message.reply_markup;
        this.edits.push({ chat_id: String(params.chat_id), message_id: Number(params.message_id), text: message.text, reply_markup: params.reply_markup });
        return respond(200, { ok: true, result: message });
      }
      default:
        return fail(404, 'Not Found');
    }
  }
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}
