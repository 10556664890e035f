// API mode: the agent container's HTTP server (the spec's "claude-cli-api").
//
//   GET  /health   unauthenticated; 200 once the server listens
//   POST /v1/run   {"prompt": "..."} -> {"ok": bool, "status": "ok"|"error"|"exited", "result": "..."}
//
// Every route but GET /health needs `Authorization: Bearer $API_KEY` (compared in
// constant time). API_KEY is the per-container token the entrypoint read from
// /run/api/.api-key and deleted; it is exported to this process only and removed from
// the environment Claude Code gets.
//
// One long-lived Claude Code process in stream-json mode, like the core's legacy path
// (core/src/agents/claude-session.ts): a message is one JSON line on stdin, the turn
// ends with a "result" line. It is started at once, so the first request finds it warm;
// turns are serialized. If it exits, the running turn answers "exited" (HTTP 503) and
// the next request starts a new one.
//
// The container has no network (as in legacy mode): the server listens on a unix socket
// in the directory the core mounted for it ($CARAPACE_API_SOCKET, /run/api/api.sock), and
// Claude Code reaches the model as in legacy mode, over ANTHROPIC_UNIX_SOCKET (the core's
// per-session LLM proxy socket).
import { spawn } from 'node:child_process';
import { createHash, timingSafeEqual } from 'node:crypto';
import { chmodSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import Fastify from 'fastify';

// The lockdown flags are the legacy command's (CLAUDE_LOCKDOWN_FLAGS in
// core/src/agents/claude-session.ts): settings from managed and user sources only, never
// from the writable workspace, and no MCP server but --mcp-config's (none).
const CLAUDE = ['-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose', '--setting-sources', 'user', '--strict-mcp-config'];
const SOCKET = process.env.CARAPACE_API_SOCKET || '/run/api/api.sock';

const apiKey = process.env.API_KEY ?? '';
// Claude Code inherits this process's environment: without the bearer token from here on.
delete process.env.API_KEY;
if (apiKey.length < 16) {
  process.stderr.write('{"code":"API_KEY_MISSING","message":"API mode needs the bearer token from /run/api/.api-key","retriable":false}\n');
  process.exit(1);
}
const expected = createHash('sha256').update(`Bearer ${apiKey}`).digest();

/** Constant time whatever the presented header's length: compare digests. */
function authorized(header) {
  if (typeof header !== 'string') return false;
  return timingSafeEqual(createHash('sha256').update(header).digest(), expected);
}

// --- Claude Code ----------------------------------------------------------------
class Claude {
  constructor() {
    this.pending = null;
    this.stderr = '';
    this.child = spawn('claude', CLAUDE, { cwd: '/workspace/group', stdio: ['pipe', 'pipe', 'pipe'] });
    this.alive = true;
    this.child.stdin.on('error', () => undefined);
    this.child.stderr.on('data', (chunk) => (this.stderr = (this.stderr + chunk.toString('utf8')).slice(-4096)));
    createInterface({ input: this.child.stdout }).on('line', (line) => this.onLine(line));
    const exited = () => {
      if (!this.alive) return;
      this.alive = false;
      this.finish({ status: 'exited', result: this.stderr });
    };
    this.child.on('exit', exited);
    this.child.on('error', exited);
  }

  turn(prompt) {
    if (!this.alive) return Promise.resolve({ status: 'exited', result: this.stderr });
    return new Promise((resolve) => {
      this.pending = resolve;
      this.child.stdin.write(`${JSON.stringify({ type: 'user', message: { role: 'user', content: [{ type: 'text', text: prompt }] } })}\n`);
    });
  }

  onLine(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (message?.type !== 'result') return;
    const ok = message.subtype === 'success' && message.is_error !== true;
    this.finish({ status: ok ? 'ok' : 'error', result: typeof message.result === 'string' ? message.result : '' });
  }

  finish(outcome) {
    const pending = this.pending;
    this.pending = null;
    pending?.(outcome);
  }

  close() {
    this.alive = false;
    this.child.kill('SIGTERM');
  }
}

let claude = new Claude();
let queue = Promise.resolve();

/** One turn at a time, in arrival order. */
function runTurn(prompt) {
  const next = queue.then(() => {
    if (!claude.alive) claude = new Claude();
    return claude.turn(prompt);
  });
  queue = next.catch(() => undefined);
  return next;
}

// --- HTTP -----------------------------------------------------------------------
// fastify's default strips unknown fields; refuse them instead.
const app = Fastify({ logger: false, bodyLimit: 1024 * 1024, ajv: { customOptions: { removeAdditional: false } } });

app.addHook('onRequest', async (request, reply) => {
  if (request.method === 'GET' && request.url === '/health') return;
  if (!authorized(request.headers.authorization)) {
    await reply.code(401).header('www-authenticate', 'Bearer').send({ ok: false, error: 'unauthorized' });
  }
});

app.get('/health', async () => ({ status: 'ok' }));

app.post('/v1/run', {
  schema: {
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['prompt'],
      properties: { prompt: { type: 'string', minLength: 1 } },
    },
  },
}, async (request, reply) => {
  const outcome = await runTurn(request.body.prompt);
  return reply.code(outcome.status === 'exited' ? 503 : 200).send({ ok: outcome.status === 'ok', status: outcome.status, result: outcome.result });
});

const stop = () => {
  claude.close();
  void app.close().then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);

// A socket left by an earlier server in this directory would make listen() fail.
rmSync(SOCKET, { force: true });
await app.listen({ path: SOCKET });
// The core connects as root or as uid 1000 (this user): no one else needs it.
chmodSync(SOCKET, 0o600);
