// What the LLM proxy lets through to the model API with the owner's key: only what the
// Claude Code CLI in the agent image really calls (captured from 2.1.330 in both agent
// modes, with an API key and with an OAuth token: `POST /v1/messages?beta=true`, nothing
// else), only the request headers it sends that the API uses, and only the configured
// models and max_tokens. Everything is checked on the raw request, before any URL
// resolution, and the upstream URL is built from the allow-listed path, never the raw one.
import type { IncomingHttpHeaders } from 'node:http';

/** The error body the Anthropic API sends, which Claude Code shows to its user. */
export type ApiErrorType = 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'not_found_error' | 'request_too_large' | 'rate_limit_error' | 'api_error';

export interface Refusal {
  status: number;
  type: ApiErrorType;
  message: string;
}

export interface ModelPolicy {
  /** Exact model names the agent may ask for. */
  models: string[];
  /** The largest max_tokens a request may ask for. */
  max_tokens: number;
}

export interface Target {
  path: string;
  /** The query string without '?', '' if none. */
  query: string;
}

/**
 * Method + exact path. count_tokens is not in the capture but is part of the Messages
 * API Claude Code's SDK uses for context accounting; it costs no model tokens.
 */
const ROUTES: ReadonlyMap<string, string> = new Map([
  ['/v1/messages', 'POST'],
  ['/v1/messages/count_tokens', 'POST'],
]);

/** Claude Code adds `?beta=true` (its SDK's beta client); nothing else is needed. */
const QUERIES: ReadonlySet<string> = new Set(['', 'beta=true']);

/**
 * Request headers forwarded upstream, by exact name: those the API uses (version, betas,
 * content negotiation) and Claude Code's client identification, which the API may use to
 * recognise Claude Code traffic (OAuth tokens are for Claude Code only). Never the agent's
 * credential (x-api-key, authorization: the proxy adds the real one), never hop-by-hop
 * headers, never anything else an agent makes up.
 */
const FORWARDED_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'content-type',
  'anthropic-version',
  'anthropic-beta',
  'user-agent',
  'x-app',
  'x-claude-code-session-id',
  'x-stainless-arch',
  'x-stainless-lang',
  'x-stainless-os',
  'x-stainless-package-version',
  'x-stainless-retry-count',
  'x-stainless-runtime',
  'x-stainless-runtime-version',
  'x-stainless-timeout',
]);

/** A forwarded header value longer than this is dropped (the longest seen is ~300). */
const MAX_HEADER_VALUE = 1024;

const refusal = (status: number, type: ApiErrorType, message: string): Refusal => ({ status, type, message });

/**
 * Checks method, path and query on the raw request target. Anything a URL parser would
 * rewrite is refused, not normalized: percent-encoding, dot segments, empty segments,
 * backslashes, an absolute-form target.
 */
export function checkTarget(method: string | undefined, rawUrl: string | undefined): Target | Refusal {
  const url = rawUrl ?? '';
  const at = url.indexOf('?');
  const path = at < 0 ? url : url.slice(0, at);
  const query = at < 0 ? '' : url.slice(at + 1);
  if (!path.startsWith('/')) return refusal(400, 'invalid_request_error', 'the request target must be an absolute path');
  if (path.includes('%')) return refusal(400, 'invalid_request_error', 'percent-encoded characters are not accepted in the path');
  if (path.includes('\\')) return refusal(400, 'invalid_request_error', 'backslashes are not accepted in the path');
  if (path.includes('//')) return refusal(400, 'invalid_request_error', 'empty path segments are not accepted');
  if (path.split('/').some((segment) => segment === '.' || segment === '..')) return refusal(400, 'invalid_request_error', 'dot segments are not accepted in the path');
  if (!/^[A-Za-z0-9/_-]+$/.test(path)) return refusal(400, 'invalid_request_error', 'unexpected characters in the path');
  const allowed = ROUTES.get(path);
  if (!allowed) return refusal(404, 'not_found_error', `${path} is not available through this proxy`);
  if (method !== allowed) return refusal(405, 'invalid_request_error', `${method ?? ''} ${path} is not available through this proxy`);
  if (!QUERIES.has(query)) return refusal(400, 'invalid_request_error', 'unexpected query string');
  return { path, query };
}

export function isRefusal(value: unknown): value is Refusal {
  return typeof value === 'object' && value !== null && 'status' in value && 'type' in value;
}

/** The request headers that go upstream: the allow-list above, single-valued, bounded. */
export function forwardedHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (!FORWARDED_HEADERS.has(name) || typeof value !== 'string' || value.length > MAX_HEADER_VALUE) continue;
    headers.set(name, value);
  }
  return headers;
}

/** What the proxy learned from a body it let through, and the body to send on. */
export interface MessagesRequest {
  model: string;
  /**
   * The parsed body serialized again: what was checked is exactly what goes upstream
   * (a duplicate "model" key, say, cannot mean one thing here and another there).
   */
  body: string;
  /** The most input tokens the request may be billed for (at most one per byte; 0 for count_tokens, which is free). */
  promptTokens: number;
  /** Its max_tokens (0 for count_tokens). */
  maxTokens: number;
}

/**
 * The body must be a JSON object naming an allowed model; a Messages request must ask for
 * at most the configured max_tokens.
 */
export function checkBody(target: Target, body: Buffer, policy: ModelPolicy): MessagesRequest | Refusal {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return refusal(400, 'invalid_request_error', 'the request body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refusal(400, 'invalid_request_error', 'the request body must be a JSON object');
  const { model, max_tokens: maxTokens } = value as { model?: unknown; max_tokens?: unknown };
  if (typeof model !== 'string') return refusal(400, 'invalid_request_error', 'model: a model name is required');
  if (!policy.models.includes(model)) {
    return refusal(400, 'invalid_request_error', `model ${JSON.stringify(model.slice(0, 100))} is not allowed here (allowed: ${policy.models.join(', ')})`);
  }
  if (target.path === '/v1/messages') {
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) return refusal(400, 'invalid_request_error', 'max_tokens: a positive integer is required');
    if (maxTokens > policy.max_tokens) return refusal(400, 'invalid_request_error', `max_tokens ${maxTokens} is above this proxy's limit of ${policy.max_tokens}`);
  }
  const sent = JSON.stringify(value);
  const billed = target.path === '/v1/messages';
  return { model, body: sent, promptTokens: billed ? Buffer.byteLength(sent) : 0, maxTokens: billed ? (maxTokens as number) : 0 };
}
