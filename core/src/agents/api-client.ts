// API mode: the core's side of an agent container's HTTP server (agent-image/api-server.mjs),
// which listens on a unix socket in a directory the core mounts into it (the container has no network).
// One turn is one POST /v1/run with the container's bearer token. node:http rather than
// fetch: fetch's built-in 300 s header timeout would cut runs the configuration allows
// to take longer; here the only deadline is the run limit.
import { lstat } from 'node:fs/promises';
import { request } from 'node:http';
import type { TurnResult } from './claude-session.js';

const MAX_RESPONSE = 4 * 1024 * 1024;

interface HttpReply {
  status: number;
  body: string;
}

/**
 * The agent owns the directory the socket is in: it could put a symlink there, to make
 * the core connect to some other socket the core can reach (the Docker socket, another
 * agent's). Only a socket itself is used. (A swap between this check and the connect
 * remains possible; the requests are fixed, and the token is that agent's own.)
 */
async function checkSocket(socketPath: string): Promise<void> {
  const stat = await lstat(socketPath);
  if (!stat.isSocket()) throw new Error(`${socketPath} is not a unix socket`);
}

/** One HTTP exchange on a fresh connection to the unix socket, aborted when `signal` fires. */
async function exchange(socketPath: string, path: string, method: 'GET' | 'POST', headers: Record<string, string>, body: string | null, signal: AbortSignal): Promise<HttpReply> {
  await checkSocket(socketPath);
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, host: 'localhost', method, headers: { ...headers, ...(body !== null ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) }, agent: false, signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_RESPONSE) chunks.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

export class ApiClient {
  private readonly inflight = new Set<AbortController>();

  /** `token` stays in the core's memory: never in the container's Env, Labels or Cmd. */
  constructor(
    /** The server's unix socket, as the core sees it. */
    private readonly socketPath: string,
    private readonly token: string,
  ) {}

  /** Polls GET /health until it answers 200 or the deadline passes. */
  async waitHealthy(deadlineMs: number, stillStarting: () => Promise<boolean> = async () => true): Promise<void> {
    const until = Date.now() + deadlineMs;
    let last = 'no answer';
    while (Date.now() < until) {
      try {
        const reply = await exchange(this.socketPath, '/health', 'GET', {}, null, AbortSignal.timeout(Math.max(100, Math.min(2000, until - Date.now()))));
        if (reply.status === 200) return;
        last = `HTTP ${reply.status}`;
      } catch (err) {
        last = (err as Error).message;
      }
      if (!(await stillStarting())) throw new Error(`the agent's API server stopped before it was healthy (${last})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the agent's API server was not healthy within ${deadlineMs} ms (${last})`);
  }

  /** One Claude Code turn. Turns never overlap (the agent manager queues per group; so does the server). */
  async turn(prompt: string, timeoutMs: number): Promise<TurnResult> {
    const controller = new AbortController();
    this.inflight.add(controller);
    const timer = setTimeout(() => controller.abort(new Error('timeout')), timeoutMs);
    try {
      const reply = await exchange(this.socketPath, '/v1/run', 'POST', { authorization: `Bearer ${this.token}` }, JSON.stringify({ prompt }), controller.signal);
      let parsed: { ok?: unknown; status?: unknown; result?: unknown } = {};
      try {
        parsed = JSON.parse(reply.body) as typeof parsed;
      } catch {
        // Not JSON: handled below as a broken server.
      }
      const output = typeof parsed.result === 'string' ? parsed.result : reply.body.slice(-2000);
      if (reply.status === 200 && parsed.ok === true) return { status: 'ok', output };
      if (reply.status === 200 && parsed.status === 'error') return { status: 'error', output };
      // Claude Code exited, the token was refused, or the answer makes no sense: the
      // container is not usable any more.
      return { status: 'exited', output: `HTTP ${reply.status}: ${output}` };
    } catch (err) {
      if ((controller.signal.reason as Error | undefined)?.message === 'timeout') return { status: 'timeout', output: '' };
      return { status: 'exited', output: `the agent's API server is unreachable: ${(err as Error).message}` };
    } finally {
      clearTimeout(timer);
      this.inflight.delete(controller);
    }
  }

  /** Abandons any turn in progress (the container is being removed). */
  close(): void {
    for (const controller of this.inflight) controller.abort(new Error('closed'));
  }
}
