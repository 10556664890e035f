// What the bot sends, one chat at a time: texts (sendMessage) and files (sendPhoto for a
// PNG or JPEG, which Telegram shows as a picture; sendDocument for anything else, and for a
// picture Telegram will not take as a photo), each waiting out Telegram's 429s within the
// caller's budget, and each sent message remembered in the chat's history.
import pino from 'pino';
import type { JsonObject } from '#sdk';
import { BotApiAborted, BotApiError, type BotApi, type TgMessage, type UploadFile } from './bot-api.js';
import type { HistoryEntry } from './chat-history.js';
import { RateLimited } from './errors.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'telegram' } }, pino.destination(2));

/** 429 handling for one tool call: at most this many retries, and this much waiting in all. */
const MAX_RETRIES = 3;
const RETRY_BUDGET_MS = 20_000;
/** Kinds Telegram shows as a photo; at most this many bytes (its sendPhoto limit). */
const PHOTO_TYPES = new Set(['image/png', 'image/jpeg']);
const PHOTO_MAX_BYTES = 10 * 1024 * 1024;
/** Telegram's limit on a caption. */
export const CAPTION_LIMIT = 1024;

/** Waiting spent on 429s across the messages of one tool call. */
export interface RetryBudget {
  waitedMs: number;
}

/** Set while a request may have reached Telegram without an answer yet (a cut-off one may have been delivered). */
export interface SendProgress {
  inFlight: boolean;
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

export class Outbox {
  private readonly locks = new Map<string, Promise<void>>();

  constructor(
    private readonly api: BotApi,
    private readonly remember: (chat: string, entry: HistoryEntry) => void,
    private readonly stopping: AbortSignal,
  ) {}

  /** `fn` alone for `chat`: the parts of two long messages never interleave. */
  async exclusive<T>(chat: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(chat) ?? Promise.resolve();
    const run = previous.then(fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(chat, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(chat) === tail) this.locks.delete(chat);
    }
  }

  send(chat: string, text: string, extra: JsonObject, budget: RetryBudget = { waitedMs: 0 }, signal = this.stopping, progress: SendProgress = { inFlight: false }): Promise<TgMessage> {
    return this.retrying(chat, text, budget, signal, progress, () => this.api.call<TgMessage>('sendMessage', { chat_id: chat, text, ...extra }, { signal }));
  }

  /** `file` with `caption` (at most CAPTION_LIMIT characters): as a photo when Telegram shows it as one. */
  async sendFile(chat: string, file: UploadFile, caption: string, budget: RetryBudget, signal: AbortSignal, progress: SendProgress): Promise<TgMessage> {
    const params = { chat_id: chat, ...(caption ? { caption } : {}) };
    const shown = caption || `[${file.name}]`;
    const document = (): Promise<TgMessage> => this.retrying(chat, shown, budget, signal, progress, () => this.api.upload<TgMessage>('sendDocument', params, 'document', file, { signal }));
    if (!PHOTO_TYPES.has(file.type.split(';')[0]) || file.bytes.length > PHOTO_MAX_BYTES) return document();
    try {
      return await this.retrying(chat, shown, budget, signal, progress, () => this.api.upload<TgMessage>('sendPhoto', params, 'photo', file, { signal }));
    } catch (err) {
      // A picture Telegram will not take as a photo (its sides, their ratio): it still goes, as a file.
      if (!(err instanceof BotApiError) || err.errorCode !== 400 || !/PHOTO/i.test(err.description)) throw err;
      log.info({ chat, reason: err.description }, 'photo refused; sending it as a document');
      return document();
    }
  }

  private async retrying(chat: string, shown: string, budget: RetryBudget, signal: AbortSignal, progress: SendProgress, request: () => Promise<TgMessage>): Promise<TgMessage> {
    for (let attempt = 0; ; attempt++) {
      try {
        progress.inFlight = true;
        const message = await request();
        progress.inFlight = false;
        this.remember(chat, { message_id: message.message_id, from: 'bot', sender: null, text: shown, date: new Date().toISOString() });
        return message;
      } catch (err) {
        // Telegram answered (a refusal): that message was not sent.
        if (err instanceof BotApiError) progress.inFlight = false;
        if (!(err instanceof BotApiError) || err.errorCode !== 429) throw err;
        const retryAfter = Math.max(1, Math.ceil(err.retryAfter ?? 1));
        if (attempt >= MAX_RETRIES || budget.waitedMs + retryAfter * 1000 > RETRY_BUDGET_MS) throw new RateLimited(retryAfter);
        log.info({ chat, retry_after: retryAfter }, 'rate limited by Telegram; waiting');
        budget.waitedMs += retryAfter * 1000;
        await sleep(retryAfter * 1000, signal);
        if (signal.aborted) throw new BotApiAborted('send');
      }
    }
  }
}
