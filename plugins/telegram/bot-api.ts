// A minimal Telegram Bot API client (POST JSON to <base>/bot<token>/<method>; a file as
// multipart/form-data, fetch's own FormData).
// The token is part of the URL path, so no error made here ever carries a URL, a
// request or the raw fetch error: only the method, Telegram's code and description.

/** Telegram answered {ok:false}, or with something that is not its JSON. */
export class BotApiError extends Error {
  constructor(
    readonly method: string,
    readonly errorCode: number,
    readonly description: string,
    /** Seconds to wait, from a 429's parameters.retry_after. */
    readonly retryAfter: number | null,
  ) {
    super(`Telegram ${method} failed (${errorCode}): ${description}`);
    this.name = 'BotApiError';
  }
}

/** Connection failures that happen before a request is sent: Telegram cannot have acted on it. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/**
 * Telegram could not be reached (or did not answer in time). `code` is e.g. ECONNREFUSED.
 * `maybeDone`: the request may have reached Telegram (a timeout, a connection cut while
 * waiting for the answer), so it may have acted: a send may have been delivered.
 */
export class BotApiUnreachable extends Error {
  readonly maybeDone: boolean;

  constructor(
    readonly method: string,
    readonly code: string,
  ) {
    super(`Telegram ${method}: Bot API unreachable (${code})`);
    this.name = 'BotApiUnreachable';
    this.maybeDone = !NOT_SENT.has(code);
  }
}

/** The call was cancelled by the caller's signal (shutdown); `maybeDone` once it had started. */
export class BotApiAborted extends Error {
  constructor(
    readonly method: string,
    readonly maybeDone = false,
  ) {
    super(`Telegram ${method}: aborted`);
    this.name = 'BotApiAborted';
  }
}

export interface TgUser {
  id: number;
  is_bot?: boolean;
  first_name?: string;
  username?: string;
}

export interface TgChat {
  id: number;
  type?: string;
  title?: string;
}

export interface TgMessage {
  message_id: number;
  date?: number;
  chat: TgChat;
  from?: TgUser;
  text?: string;
}

export interface TgCallbackQuery {
  id: string;
  from: TgUser;
  message?: TgMessage;
  data?: string;
}

export interface TgUpdate {
  update_id: number;
  message?: TgMessage;
  callback_query?: TgCallbackQuery;
}

const DEFAULT_TIMEOUT_MS = 15_000;
/** A file of up to 10 MB on a slow uplink. */
const UPLOAD_TIMEOUT_MS = 120_000;

export interface UploadFile {
  name: string;
  type: string;
  bytes: Buffer;
}

interface ApiReply {
  ok?: unknown;
  result?: unknown;
  error_code?: unknown;
  description?: unknown;
  parameters?: { retry_after?: unknown };
}

export class BotApi {
  private readonly base: string;

  constructor(baseUrl: string, private readonly token: string) {
    this.base = baseUrl.replace(/\/+$/, '');
  }

  /** Removes the token from text that came from outside (belt and braces: the core scrubs too). */
  scrub(text: string): string {
    return this.token ? text.split(this.token).join('<token>') : text;
  }

  call<T>(method: string, params: Record<string, unknown>, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<T> {
    return this.post<T>(method, () => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(params) }), opts);
  }

  /** `method` with `file` uploaded as its `field` (sendPhoto's photo, sendDocument's document) beside `params`. */
  upload<T>(method: string, params: Record<string, string>, field: string, file: UploadFile, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<T> {
    return this.post<T>(method, () => {
      const form = new FormData();
      for (const [key, value] of Object.entries(params)) form.append(key, value);
      form.append(field, new Blob([new Uint8Array(file.bytes)], { type: file.type }), file.name);
      return { body: form };
    }, { timeoutMs: UPLOAD_TIMEOUT_MS, ...opts });
  }

  private async post<T>(method: string, request: () => { headers?: Record<string, string>; body: string | FormData }, opts: { signal?: AbortSignal; timeoutMs?: number }): Promise<T> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const onAbort = (): void => controller.abort();
    if (opts.signal?.aborted) {
      clearTimeout(timer);
      throw new BotApiAborted(method); // never started: nothing reached Telegram
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let response: Response;
      let text: string;
      try {
        response = await fetch(`${this.base}/bot${this.token}/${method}`, { method: 'POST', ...request(), signal: controller.signal });
        text = await response.text();
      } catch (err) {
        if (opts.signal?.aborted && !timedOut) throw new BotApiAborted(method, true);
        if (timedOut) throw new BotApiUnreachable(method, 'ETIMEDOUT');
        throw new BotApiUnreachable(method, networkCode(err));
      }
      let body: ApiReply | null;
      try {
        body = JSON.parse(text) as ApiReply | null;
      } catch {
        body = null;
      }
      if (body && body.ok === true && response.ok) return body.result as T;
      const code = typeof body?.error_code === 'number' ? body.error_code : response.status;
      const description = typeof body?.description === 'string' ? this.scrub(body.description).slice(0, 300) : `unexpected response (HTTP ${response.status})`;
      const retryAfter = typeof body?.parameters?.retry_after === 'number' ? body.parameters.retry_after : null;
      throw new BotApiError(method, code, description, retryAfter);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }
}

/** ECONNREFUSED & co. from undici's "fetch failed" (the code sits on err.cause). */
function networkCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown; cause?: { code?: unknown } } } | null;
  const code = e?.cause?.code ?? e?.code ?? e?.cause?.cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? code : 'network error';
}
