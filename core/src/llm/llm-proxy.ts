// The LLM proxy: agents have no network and no model key. Each session gets an HTTP
// endpoint on a unix socket in its own directory; a request must carry that session's
// token, pass the request policy (request-policy.ts: method, path, headers, model,
// max_tokens) and the group's budgets (budgets.ts), and is then forwarded upstream with
// the real credential, the answer streamed back and its tokens counted. The real key
// never leaves the core, and lends itself to nothing but Claude Code's model calls.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AuditInput, AuditLog } from '../audit/audit-log.js';
import { parseConfig, type LlmSettings } from '../config.js';
import { Budgets, dayOf, type Admission, type Cost, type GroupUsage, type Spent } from './budgets.js';
import { costMicros, usd, worstCaseMicros, type ModelPrice } from './prices.js';
import { checkBody, checkTarget, forwardedHeaders, isRefusal, type ApiErrorType, type MessagesRequest, type Refusal } from './request-policy.js';
import { UsageStore, type DayUsage } from './usage-store.js';
import { UsageMeter } from './usage.js';
import { classifyRefusal, ModelHealth, REFUSAL_STATUSES, type ModelHealthReport, type ModelProblem } from './model-health.js';

export interface LlmCredential {
  /** Sent as x-api-key. */
  apiKey?: string;
  /** Sent as Authorization: Bearer (Claude Code OAuth token). */
  oauthToken?: string;
}

export interface LlmProxyOptions {
  upstream: string;
  credential: LlmCredential;
  audit: AuditLog;
  /** Models, max_tokens, budgets, concurrency: carapace.json's `llm` (its defaults if absent). */
  settings?: LlmSettings;
  /** Where usage per group per day is kept (in memory if absent). */
  usage?: UsageStore;
  /** Tells a group's user something on its channel (the core's `user.notify`). */
  notify?: (group: string, text: string) => void;
  /**
   * The model API refused the credential in a way the person must fix (model-health.ts):
   * the session's turn should end with `problem.message` rather than retry.
   */
  refused?: (session: string, group: string, problem: ModelProblem) => void;
  /** A budget refused the group's request, until `retryAfterSeconds` from now: its next turns wait for it. */
  overBudget?: (group: string, retryAfterSeconds: number) => void;
  /** Tests only: the budget clock, how long a whole request may take to arrive, how long an answer is read after the agent hung up. */
  now?: () => number;
  requestTimeoutMs?: number;
  drainMs?: number;
}

export interface LlmSessionOptions {
  /**
   * Awaited before the session's first model answer is relayed to the agent. It starts
   * when the first authorized request arrives, alongside the upstream call, so it costs
   * no latency unless it is slower than the model. If it fails, that answer and every
   * later one is withheld (503): the agent gets no model output the check did not pass.
   */
  beforeFirstAnswer?: () => Promise<void>;
}

export interface LlmSession {
  socketPath: string;
  /** What the agent presents as its API key: useless anywhere but on this socket. */
  token: string;
}

/** Request bodies larger than this are refused (the API's own limit; Claude Code's are far smaller). */
const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** Connections one session's socket accepts at once (Claude Code keeps a few alive); more are closed. */
const MAX_CONNECTIONS = 32;
/** A request's headers, and the whole request with its body, must arrive within these. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 60_000;

/** Connection errors that prove a request never reached the model API (nothing to charge). */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** How long an answer is read on for its usage figures after the agent hung up. */
const DRAIN_MS = 10 * 60_000;

const OAUTH_BETA = 'oauth-2025-04-20';

const DROP_RESPONSE = new Set(['connection', 'content-length', 'transfer-encoding', 'keep-alive', 'content-encoding']);

interface SessionState {
  token: string;
  session: string;
  group: string;
  ready: (() => Promise<void>) | null;
  inFlight: number;
}

/** The real credential on an upstream request (the proxy's, and the doctor's model check). */
export function withCredential(headers: Headers, credential: LlmCredential): Headers {
  if (credential.apiKey) headers.set('x-api-key', credential.apiKey);
  else if (credential.oauthToken) {
    headers.set('authorization', `Bearer ${credential.oauthToken}`);
    // The API takes an OAuth token only with this beta; the agent, given an API-key-shaped
    // session token, does not send it.
    const betas = (headers.get('anthropic-beta') ?? '').split(',').map((b) => b.trim()).filter(Boolean);
    if (!betas.includes(OAUTH_BETA)) headers.set('anthropic-beta', [...betas, OAUTH_BETA].join(','));
  }
  return headers;
}

export class LlmProxy {
  private readonly servers = new Map<string, Server>();
  private readonly settings: LlmSettings;
  private readonly budgets: Budgets;
  private readonly store: UsageStore;
  private readonly health = new ModelHealth();

  constructor(private readonly options: LlmProxyOptions) {
    this.settings = options.settings ?? parseConfig({}).llm;
    this.store = options.usage ?? new UsageStore(null);
    this.budgets = new Budgets(this.settings, this.store, (err) =>
      options.audit.record({ group: null, session: null, source: 'llm-proxy', topic: null, correlation: null, stage: 'llm', outcome: 'error', reason: `usage store: ${err.message}` }),
      options.now,
      (group, text) => options.notify?.(group, text),
    );
  }

  /** Today's model usage and budgets per group (`groups` are listed even if unused). */
  usage(groups: string[] = []): GroupUsage[] {
    return this.budgets.report(groups);
  }

  /** Whether the model API takes the credential, as the last answer said. */
  modelHealth(): ModelHealthReport {
    return this.health.report();
  }

  /** Tokens and requests per group per UTC day over the last `days` days (today included). */
  usageHistory(days: number): DayUsage[] {
    return this.store.since(dayOf((this.options.now ?? Date.now)() - (days - 1) * 86_400_000));
  }

  async open(sessionId: string, group: string, socketPath: string, options: LlmSessionOptions = {}): Promise<LlmSession> {
    const token = `carapace-${randomBytes(24).toString('hex')}`;
    const check = options.beforeFirstAnswer;
    let checked: Promise<void> | null = null;
    const ready = check
      ? (): Promise<void> => {
          if (!checked) {
            checked = check();
            checked.catch(() => undefined); // awaited (and reported) where an answer is relayed
          }
          return checked;
        }
      : null;
    const state: SessionState = { token, session: sessionId, group, ready, inFlight: 0 };
    const requestTimeout = this.options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    // The timeouts are enforced by a sweep over the connections every interval.
    const timeouts = { requestTimeout, headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeout), connectionsCheckingInterval: Math.min(5_000, requestTimeout) };
    const server = createServer(timeouts, (req, res) =>
      void this.handle(req, res, state).catch((err: unknown) => {
        this.audit(state, req, 'error', `proxy failure: ${(err as Error)?.message ?? String(err)}`);
        if (!res.headersSent) sendError(res, { status: 500, type: 'api_error', message: 'the LLM proxy failed on this request' });
        else res.destroy();
      }),
    );
    server.maxConnections = MAX_CONNECTIONS;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
    await chmod(socketPath, 0o666);
    this.servers.set(sessionId, server);
    return { socketPath, token };
  }

  async close(sessionId: string): Promise<void> {
    const server = this.servers.get(sessionId);
    if (!server) return;
    this.servers.delete(sessionId);
    server.closeAllConnections();
    const address = server.address();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if (typeof address === 'string') await rm(address, { force: true });
  }

  private authorized(req: IncomingMessage, token: string): boolean {
    const presented = req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer\s+/i, '');
    const given = Buffer.from(typeof presented === 'string' ? presented : '');
    const expected = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private audit(state: SessionState, req: IncomingMessage, outcome: 'ok' | 'rejected' | 'error', reason: string, code?: string): void {
    const input: AuditInput = {
      group: state.group,
      session: state.session,
      source: 'llm-proxy',
      topic: `llm ${req.method ?? ''} ${(req.url ?? '').split('?')[0]}`.slice(0, 128),
      correlation: null,
      stage: 'llm',
      outcome,
      reason,
      ...(code ? { code } : {}),
    };
    // A refusal is cheap to repeat: a flood of them is summarised (per session and code).
    if (outcome === 'rejected') this.options.audit.recordRejection({ group: state.group, session: state.session, stage: 'llm', code: code ?? 'LLM_REQUEST_REFUSED' }, [this.options.audit.stamp(input)]);
    else this.options.audit.record(input);
  }

  private async handle(req: IncomingMessage, res: ServerResponse, state: SessionState): Promise<void> {
    const refuse = async (refusal: Refusal, code = 'LLM_REQUEST_REFUSED', headers: Record<string, string> = {}): Promise<void> => {
      this.audit(state, req, 'rejected', refusal.message, code);
      // Read (and drop) the body first: answering before it is in makes the client's
      // write fail (EPIPE), and Claude Code would show that instead of the reason.
      await discard(req);
      sendError(res, refusal, headers);
    };
    if (!this.authorized(req, state.token)) return refuse({ status: 401, type: 'authentication_error', message: 'invalid session token' });
    // No unaudited model use: while the audit log cannot be written, nothing is forwarded.
    if (!this.options.audit.writable) return refuse({ status: 503, type: 'api_error', message: 'the audit log cannot be written right now; try again later' }, 'AUDIT_UNAVAILABLE', { 'retry-after': '5' });
    // Every request counts against the budgets, refused ones too: a flood of bad requests
    // is cut off by the rate limit before any more work is done for it.
    const admission = this.budgets.admit(state.group);
    if (!admission.ok) return this.overBudget(state, req, res, admission);
    const target = checkTarget(req.method, req.url);
    if (isRefusal(target)) return refuse(target);
    if (state.inFlight >= this.settings.max_concurrent_requests) {
      return refuse({ status: 429, type: 'rate_limit_error', message: `at most ${this.settings.max_concurrent_requests} model requests at once per agent` }, 'LLM_CONCURRENCY');
    }
    state.inFlight++;
    try {
      await this.forward(req, res, state, target);
    } finally {
      state.inFlight--;
    }
  }

  private async forward(req: IncomingMessage, res: ServerResponse, state: SessionState, target: { path: string; query: string }): Promise<void> {
    const refuse = (refusal: Refusal): void => {
      this.audit(state, req, 'rejected', refusal.message, 'LLM_REQUEST_REFUSED');
      sendError(res, refusal);
    };
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_BODY_BYTES) {
      refuse({ status: 413, type: 'request_too_large', message: 'request too large' });
      req.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          refuse({ status: 413, type: 'request_too_large', message: 'request too large' });
          req.destroy();
          return;
        }
        chunks.push(chunk);
      }
    } catch {
      return this.audit(state, req, 'rejected', 'the request body did not arrive (client gone or too slow)', 'LLM_REQUEST_REFUSED');
    }
    const body = Buffer.concat(chunks);
    const checked = checkBody(target, body, this.settings);
    if (isRefusal(checked)) return refuse(checked);

    // A model without a price fails closed (the configuration check already requires one).
    const price = this.settings.prices[checked.model];
    if (!price) return refuse({ status: 400, type: 'invalid_request_error', message: `the model ${checked.model} has no price in llm.prices` });
    // Worst case first: the request is admitted only if its input and max_tokens fit what
    // the group has left, counting what its other requests in flight hold.
    const worstCase: Cost = { tokens: checked.promptTokens + checked.maxTokens, micros: worstCaseMicros(price, checked.promptTokens, checked.maxTokens) };
    const reservation = this.budgets.reserve(state.group, worstCase);
    if (!reservation.ok) return this.overBudget(state, req, res, reservation);
    let spent: Spent | null = null; // a throw charges the reservation
    try {
      spent = await this.relay(req, res, state, target, checked, price, worstCase);
    } finally {
      reservation.settle(spent);
    }
  }

  /**
   * A budget refused the request: the group's people are told the first time, it is
   * audited, and the agent gets a 429 whose retry-after is when the budget comes back;
   * x-should-retry tells its SDK not to retry meanwhile (Claude Code shows the refusal at
   * once: "API Error: Request rejected (429) · <message>").
   */
  private async overBudget(state: SessionState, req: IncomingMessage, res: ServerResponse, refusal: Extract<Admission, { ok: false }>): Promise<void> {
    if (refusal.first) this.options.notify?.(state.group, refusal.message);
    this.options.overBudget?.(state.group, refusal.retryAfterSeconds);
    this.audit(state, req, 'rejected', `${refusal.message}${refusal.first ? '; the user was told' : ''}`, 'LLM_BUDGET_EXHAUSTED');
    await discard(req);
    sendError(res, { status: 429, type: 'rate_limit_error', message: refusal.message }, { 'retry-after': String(refusal.retryAfterSeconds), 'x-should-retry': 'false' });
  }

  /**
   * Sends the checked request upstream and relays the answer. What it cost comes from the
   * upstream's own usage figures, read to the end whatever the agent does: an agent that
   * hangs up stops being written to, not the meter (for at most DRAIN_MS, counted as one of
   * its requests in flight). Null when the answer ended without its final figures: then
   * the whole reservation is charged.
   */
  private async relay(req: IncomingMessage, res: ServerResponse, state: SessionState, target: { path: string; query: string }, checked: MessagesRequest, price: ModelPrice, worstCase: Cost): Promise<Spent | null> {
    const released = state.ready?.();
    const headers = withCredential(forwardedHeaders(req.headers), this.options.credential);
    const abort = new AbortController();
    let drain: NodeJS.Timeout | null = null;
    res.on('close', () => {
      if (!res.writableFinished) drain = setTimeout(() => abort.abort(), this.options.drainMs ?? DRAIN_MS);
    });
    let upstreamResponse: Response;
    try {
      upstreamResponse = await fetch(new URL(`${target.path}${target.query ? `?${target.query}` : ''}`, this.options.upstream), { method: 'POST', headers, body: checked.body, signal: abort.signal });
    } catch (err) {
      if (drain) clearTimeout(drain);
      // Free only if the request surely never reached the model API; anything else may have been billed.
      const code = (err as { cause?: { code?: string } }).cause?.code ?? '';
      const unsent = NOT_SENT.has(code);
      this.audit(state, req, 'error', `upstream unreachable: ${(err as Error).message}${code ? ` (${code})` : ''}${unsent ? '' : `; the reservation (${charged(worstCase)}) is charged`}`);
      sendError(res, { status: 502, type: 'api_error', message: 'model API unreachable' });
      return unsent ? NOTHING : null;
    }
    try {
      if (released) {
        try {
          await released;
        } catch (err) {
          await upstreamResponse.body?.cancel().catch(() => undefined);
          this.audit(state, req, 'error', `answer withheld: ${(err as Error).message}`);
          sendError(res, { status: 503, type: 'api_error', message: 'the agent may not receive model output' });
          return null;
        }
      }
      const outHeaders: Record<string, string> = {};
      upstreamResponse.headers.forEach((value, name) => {
        if (!DROP_RESPONSE.has(name)) outHeaders[name] = value;
      });
      if (upstreamResponse.ok) this.health.succeeded();
      else if (REFUSAL_STATUSES.has(upstreamResponse.status)) {
        await this.refusedUpstream(req, res, state, upstreamResponse, outHeaders, checked.model);
        return NOTHING;
      }
      if (!res.destroyed) res.writeHead(upstreamResponse.status, outHeaders);
      const meter = new UsageMeter();
      let complete = true;
      try {
        if (upstreamResponse.body) {
          for await (const chunk of Readable.fromWeb(upstreamResponse.body as import('node:stream/web').ReadableStream<Uint8Array>)) {
            const buffer = Buffer.from(chunk as Uint8Array);
            meter.push(buffer);
            if (res.destroyed) continue; // the agent hung up: read on for the usage figures
            // A slow reader slows the upstream read; the proxy holds no more than one chunk.
            if (!res.write(buffer)) await drained(res);
          }
        }
      } catch {
        complete = false;
      }
      const agentGone = res.destroyed;
      res.end();
      const usage = meter.end();
      const cost = costMicros(price, usage);
      const counts = `cost_usd ${(cost / 1_000_000).toFixed(6)}; input_tokens ${usage.input_tokens}; output_tokens ${usage.output_tokens}; cache_read_input_tokens ${usage.cache_read_input_tokens}; cache_creation_input_tokens ${usage.cache_creation_input_tokens}`;
      const settled = upstreamResponse.ok && !meter.final ? `; no final usage figures: the reservation (${charged(worstCase)}) is charged` : '';
      const ok = upstreamResponse.ok && complete && !agentGone;
      this.audit(state, req, ok ? 'ok' : 'error', `status ${upstreamResponse.status}; model ${checked.model}; ${counts}${complete ? '' : '; stream cut short'}${agentGone ? '; the agent hung up (read to the end)' : ''}${settled}`);
      if (!upstreamResponse.ok) return NOTHING;
      return meter.final ? { ...UsageMeter.total(usage), micros: cost } : null;
    } finally {
      if (drain) clearTimeout(drain);
    }
  }

  /**
   * A 4xx that may be the credential's: relayed as the upstream said it, but marked not to
   * be retried; a refusal the person must fix ends the turn (`refused`) and shows on the
   * console until a request succeeds.
   */
  private async refusedUpstream(req: IncomingMessage, res: ServerResponse, state: SessionState, upstream: Response, headers: Record<string, string>, model: string): Promise<void> {
    const body = await readSmall(upstream).catch(() => '');
    const credentialVar = this.options.credential.apiKey ? 'ANTHROPIC_API_KEY' : 'CLAUDE_CODE_OAUTH_TOKEN';
    const classified = classifyRefusal(upstream.status, body, credentialVar, model);
    const problem = classified && this.health.refused(classified);
    if (problem) headers['x-should-retry'] = 'false';
    res.writeHead(upstream.status, headers).end(body);
    this.audit(state, req, 'error', `status ${upstream.status}; model ${model}; ${problem ? `${problem.message} (upstream: ${problem.upstream})` : 'refused'}`, problem ? 'MODEL_REFUSED' : undefined);
    if (problem) this.options.refused?.(state.session, state.group, problem);
  }
}

/** An error body, read whole up to `max` bytes (an error is small; more is cut). */
async function readSmall(response: Response, max = 64 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (response.body) {
    for await (const chunk of Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>)) {
      const buffer = Buffer.from(chunk as Uint8Array);
      chunks.push(buffer.subarray(0, max - size));
      size += buffer.length;
      if (size >= max) break;
    }
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendError(res: ServerResponse, refusal: Refusal, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.destroy();
  const body: { type: 'error'; error: { type: ApiErrorType; message: string } } = { type: 'error', error: { type: refusal.type, message: refusal.message } };
  res.writeHead(refusal.status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** Reads a request body to its end without keeping it; one too large is cut off. */
function discard(req: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    if (req.complete) return resolve();
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) req.destroy();
    });
    req.once('end', resolve);
    req.once('close', resolve);
    req.once('error', () => resolve());
  });
}

/** Resolves when the response may be written again, or is gone. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** A request that cost nothing (refused upstream, or never sent). */
const NOTHING: Spent = { input: 0, output: 0, micros: 0 };

const charged = (worstCase: Cost): string => `${worstCase.tokens} tokens, ${usd(worstCase.micros)}`;
