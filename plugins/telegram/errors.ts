// What a Bot API failure means to the plugin's start, its logs and the agent's send.
import { InitError, ToolError } from '#sdk';
import { BotApiAborted, BotApiError, BotApiUnreachable } from './bot-api.js';

/** 429s that outlast the retry budget: the agent may try again after `retryAfter` s. */
export class RateLimited extends Error {
  constructor(readonly retryAfter: number) {
    super(`rate limited for ${retryAfter} s`);
  }
}

export function describe(err: unknown): string {
  if (err instanceof BotApiError || err instanceof BotApiUnreachable || err instanceof BotApiAborted || err instanceof RateLimited) return err.message;
  return err instanceof Error ? err.name : 'unknown error';
}

export function initFailure(err: unknown): Error {
  if (err instanceof BotApiUnreachable) return new InitError('NETWORK_ERROR', err.message);
  if (err instanceof BotApiError) {
    if (err.errorCode === 401 || err.errorCode === 403) return new InitError('AUTH_ERROR', `Telegram rejected the bot token (${err.errorCode} ${err.description})`);
    if (err.errorCode === 404) return new InitError('CONFIG_ERROR', 'the Bot API answered 404 to getMe: check api_base_url and the token format');
    if (err.errorCode === 429 || err.errorCode >= 500) return new InitError('NETWORK_ERROR', err.message);
    return new InitError('INTERNAL_ERROR', err.message);
  }
  return err instanceof Error ? err : new Error(String(err));
}

/** What the agent sees when a send fails: actionable, and never a URL. */
export function toolError(err: unknown, sent: number, total: number): unknown {
  const partial = sent > 0 ? ` (${sent} of ${total} parts were already sent; send only the rest)` : '';
  // The Bot API may have delivered it without our hearing back: a retry could say it twice.
  if ((err instanceof BotApiUnreachable || err instanceof BotApiAborted) && err.maybeDone) {
    const why = err instanceof BotApiAborted ? 'the Telegram plugin stopped while waiting for' : 'Telegram did not send';
    return new ToolError({ code: 'RESULT_UNKNOWN', message: `${why} its confirmation: part ${sent + 1} of ${total} may or may not have reached the chat${partial}. Do not send it again unless the person asks`, retriable: false });
  }
  if (err instanceof RateLimited) return new ToolError({ message: `Telegram rate limit reached: try again in ${err.retryAfter} s${partial}`, retriable: true });
  if (err instanceof BotApiUnreachable) return new ToolError({ message: `Telegram is unreachable right now${partial}`, retriable: true });
  if (err instanceof BotApiAborted) return new ToolError({ message: `the Telegram plugin is stopping${partial}`, retriable: true });
  if (err instanceof BotApiError) {
    const retriable = err.errorCode >= 500;
    return new ToolError({ message: `Telegram refused the message: ${err.description}${partial}`, retriable });
  }
  return err;
}
