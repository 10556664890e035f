// The LLM proxy: agents have no network and no model key. Each session gets an HTTP
// endpoint on a unix socket in its own directory; a request must carry that session's
// token, and the proxy forwards it upstream with the real credential, streaming the
// answer back. The real key never leaves the core.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AuditLog } from '../audit/audit-log.js';
import { UsageMeter } from './usage.js';

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

/** Request bodies larger than this are refused (Messages requests are far smaller). */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

// Hop-by-hop and credential headers never pass through in either direction.
const DROP_REQUEST = new Set(['host', 'connection', 'content-length', 'x-api-key', 'authorization', 'transfer-encoding', 'keep-alive', 'accept-encoding']);
const DROP_RESPONSE = new Set(['connection', 'content-length', 'transfer-encoding', 'keep-alive', 'content-encoding']);

export class LlmProxy {
  private readonly servers = new Map<string, Server>();

  constructor(private readonly options: LlmProxyOptions) {}

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
    const server = createServer((req, res) => void this.forward(req, res, token, sessionId, group, ready));
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

  private async forward(req: IncomingMessage, res: ServerResponse, token: string, session: string, group: string, ready: (() => Promise<void>) | null): Promise<void> {
    const { audit, upstream, credential } = this.options;
    const record = (outcome: 'ok' | 'rejected' | 'error', reason: string) =>
      audit.record({ group, session, source: 'llm-proxy', topic: `llm ${req.method ?? ''} ${(req.url ?? '').split('?')[0]}`.slice(0, 128), correlation: null, stage: 'llm', outcome, reason });
    const refuse = (status: number, message: string) => {
      // A refusal is cheap to repeat: a flood of them is summarised (per session and status).
      const entry = audit.stamp({ group, session, source: 'llm-proxy', topic: `llm ${req.method ?? ''} ${(req.url ?? '').split('?')[0]}`.slice(0, 128), correlation: null, stage: 'llm', outcome: 'rejected', reason: message, code: `HTTP_${status}` });
      audit.recordRejection({ group, session, stage: 'llm', code: `HTTP_${status}` }, [entry]);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'permission_error', message } }));
    };
    if (!this.authorized(req, token)) return refuse(401, 'invalid session token');
    if (!req.url?.startsWith('/v1/')) return refuse(404, 'only /v1/ API paths are proxied');
    // No unaudited model use: while the audit log cannot be written, nothing is forwarded.
    if (!audit.writable) return refuse(503, 'audit log unavailable; try again later');
    const released = ready?.();

    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return refuse(413, 'request too large');
      chunks.push(chunk);
    }
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (!DROP_REQUEST.has(name) && typeof value === 'string') headers.set(name, value);
    }
    if (credential.apiKey) headers.set('x-api-key', credential.apiKey);
    else if (credential.oauthToken) headers.set('authorization', `Bearer ${credential.oauthToken}`);

    let upstreamResponse: Response;
    try {
      upstreamResponse = await fetch(new URL(req.url, upstream), {
        method: req.method,
        headers,
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
      });
    } catch (err) {
      record('error', `upstream unreachable: ${(err as Error).message}`);
      res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'model API unreachable' } }));
      return;
    }
    if (released) {
      try {
        await released;
      } catch (err) {
        await upstreamResponse.body?.cancel().catch(() => undefined);
        record('error', `answer withheld: ${(err as Error).message}`);
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'the agent may not receive model output' } }));
        return;
      }
    }
    const outHeaders: Record<string, string> = {};
    upstreamResponse.headers.forEach((value, name) => {
      if (!DROP_RESPONSE.has(name)) outHeaders[name] = value;
    });
    res.writeHead(upstreamResponse.status, outHeaders);
    const meter = new UsageMeter();
    if (upstreamResponse.body) {
      for await (const chunk of Readable.fromWeb(upstreamResponse.body as import('node:stream/web').ReadableStream<Uint8Array>)) {
        const buffer = Buffer.from(chunk as Uint8Array);
        meter.push(buffer);
        res.write(buffer);
      }
    }
    res.end();
    const usage = meter.end();
    record(upstreamResponse.ok ? 'ok' : 'error', `status ${upstreamResponse.status}; input_tokens ${usage.input_tokens}; output_tokens ${usage.output_tokens}`);
  }
}
