// A scripted stand-in for the Anthropic Messages API, speaking its real wire format:
// JSON responses, or server-sent events when the request asks to stream. A policy
// function decides each reply from the request, so a real Claude Code CLI can be led
// through a conversation with tool_use blocks.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Block = { type: 'text'; text: string } | { type: 'tool_use'; id?: string; name: string; input: Record<string, unknown> };

export interface RecordedRequest {
  method: string;
  path: string;
  /** The query string, without its '?' ('' when there is none). */
  query: string;
  headers: IncomingHttpHeaders;
  body: any;
}

export type Policy = (request: RecordedRequest) => Block[];

export class AnthropicStandIn {
  readonly requests: RecordedRequest[] = [];
  private server: Server | null = null;
  private counter = 0;
  /** Holds every answer this long: a model that hangs. */
  delayMs = 0;
  /** The only key accepted (null: any); others get the real API's 401. */
  modelKey: string | null = null;
  /** What each answer bills (the real API's usage figures). */
  usage = { input_tokens: 12, output_tokens: 7 };
  /** A stream pauses this long before its message_delta (the final usage figures). */
  pauseBeforeDeltaMs = 0;
  /** A stream's connection is cut where its message_delta would be: the figures never arrive. */
  cutBeforeDelta = false;
  /** Every model call answered with this error, as the real API words it (null: answer). */
  failWith: { status: number; type: string; message: string } | null = null;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(public policy: Policy) {}

  async start(host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body: any = null;
        try {
          body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null;
        } catch {
          body = null;
        }
        const [path, ...query] = (req.url ?? '').split('?');
        const recorded: RecordedRequest = { method: req.method ?? '', path, query: query.join('?'), headers: req.headers, body };
        this.requests.push(recorded);
        // Like the real API: the key is checked on every call (when the stand-in knows it).
        if (this.modelKey !== null && req.headers['x-api-key'] !== this.modelKey) {
          res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }));
          return;
        }
        if (req.method === 'GET' && recorded.path === '/v1/models') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ type: 'model', id: 'claude-standin' }], has_more: false }));
          return;
        }
        if (req.method !== 'POST' || !recorded.path.startsWith('/v1/messages')) {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not here' } }));
          return;
        }
        if (this.failWith) {
          const { status, type, message } = this.failWith;
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type, message } }));
          return;
        }
        if (recorded.path === '/v1/messages/count_tokens') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: 10 }));
          return;
        }
        const blocks = this.policy(recorded).map((b) => (b.type === 'tool_use' ? { ...b, id: b.id ?? `toolu_${++this.counter}` } : b));
        const message = {
          id: `msg_${++this.counter}`,
          type: 'message',
          role: 'assistant',
          model: body?.model ?? 'claude-standin',
          content: blocks,
          stop_reason: blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
          stop_sequence: null,
          usage: { ...this.usage },
        };
        const reply = () => (body?.stream ? this.stream(res, message) : res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(message)));
        if (this.delayMs > 0) {
          const timer = setTimeout(() => {
            this.timers.delete(timer);
            reply();
          }, this.delayMs);
          this.timers.add(timer);
        } else reply();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://${host}:${port}`;
  }

  private stream(res: import('node:http').ServerResponse, message: { content: Block[]; usage: { input_tokens: number; output_tokens: number } } & Record<string, unknown>): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    send('message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { input_tokens: message.usage.input_tokens, output_tokens: 1 } } });
    message.content.forEach((block, index) => {
      if (block.type === 'text') {
        send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } });
      } else {
        send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
        send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
      }
      send('content_block_stop', { type: 'content_block_stop', index });
    });
    const finish = () => {
      if (res.destroyed) return;
      if (this.cutBeforeDelta) return void res.destroy();
      send('message_delta', { type: 'message_delta', delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } });
      send('message_stop', { type: 'message_stop' });
      res.end();
    };
    if (this.pauseBeforeDeltaMs <= 0) return finish();
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      finish();
    }, this.pauseBeforeDeltaMs);
    this.timers.add(timer);
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Whether the request offers the model a tool of this name. */
export function hasTool(request: RecordedRequest, name: string): boolean {
  return (request.body?.tools ?? []).some((t: { name: string }) => t.name === name);
}

/** The newest prompt of a request: the latest user turn with text, not tool results. */
export function lastPrompt(request: RecordedRequest): string {
  for (const message of [...(request.body?.messages ?? [])].reverse()) {
    if (message.role !== 'user') continue;
    const blocks = Array.isArray(message.content) ? message.content : [{ type: 'text', text: message.content }];
    if (blocks.some((b: { type: string }) => b.type === 'tool_result')) continue;
    return blocks.map((b: { text?: string }) => b.text ?? '').join('\n');
  }
  return '';
}

/** The text of every tool_result since the user's latest prompt, oldest first. */
export function toolResults(request: RecordedRequest): string[] {
  const out: string[] = [];
  for (const message of request.body?.messages ?? []) {
    if (message.role !== 'user') continue;
    const blocks = Array.isArray(message.content) ? message.content : [{ type: 'text', text: message.content }];
    // A user turn with text (not only tool results) starts a new exchange.
    if (blocks.some((b: { type: string }) => b.type === 'text') && !blocks.some((b: { type: string }) => b.type === 'tool_result')) out.length = 0;
    for (const block of blocks) {
      if (block.type !== 'tool_result') continue;
      out.push(typeof block.content === 'string' ? block.content : (block.content ?? []).map((c: { text?: string }) => c.text ?? '').join(''));
    }
  }
  return out;
}
