// The plugin host's end of one plugin's channel: JSON lines over a socket pair (fd 3 of the
// plugin's process). Node's own IPC channel (`stdio: 'ipc'`) parses whatever a child writes
// with no bound and no catch: one line of garbage from a plugin ended the host, every plugin
// with it, and a line without end grew the host's memory until V8 gave up. Here what a
// plugin sends is bounded (size, depth, shape, rate) and so is what waits for it to read.
import type { Socket } from 'node:net';
import { INIT_FAILURE_CATEGORIES } from '../src/protocol/errors.js';
import { createAjv } from '../src/plugins/schema-compiler.js';
import type { RunnerToSupervisor, SupervisorToRunner } from './child-protocol.js';

/** One message from a plugin: far above the core's own bound on a response (1 MB). */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;
/** Nesting deeper than this is no plugin's data, and JSON.stringify would overflow the stack on it. */
export const MAX_DEPTH = 64;
/** What may wait for a plugin to read (beyond the kernel's own buffer) before it counts as not reading. */
export const MAX_UNREAD_BYTES = 16 * 1024 * 1024;
/** Messages a plugin may send of its own accord per second, after a burst: more, and the host stops reading it for a while. */
export const MESSAGES_PER_SECOND = 500;
export const MESSAGE_BURST = 1000;

export type ChannelFault = { code: 'MESSAGE_TOO_LARGE' | 'MALFORMED_MESSAGE' | 'UNREAD_BACKLOG'; detail: string };

export interface ChannelEvents {
  /** True when it answered something the host asked (a request, a hook, a ping): that costs it no rate. */
  message(message: RunnerToSupervisor): boolean;
  /** The plugin broke the channel's rules: the channel is closed, the process must end. */
  fault(fault: ChannelFault): void;
  /** The plugin sends faster than the rate: reading paused for `pausedMs` (said once per pause). */
  throttled(pausedMs: number): void;
}

const id = { type: 'string', maxLength: 200 } as const;
const text = { type: 'string', maxLength: 1_000_000 } as const;
const shapes: Record<RunnerToSupervisor['t'], object> = {
  init: {
    type: 'object',
    required: ['t', 'ok'],
    properties: { t: {}, ok: { type: 'boolean' }, category: { enum: [...INIT_FAILURE_CATEGORIES] }, detail: text },
    if: { properties: { ok: { const: false } } },
    then: { required: ['category', 'detail'] },
  },
  response: {
    type: 'object',
    required: ['t', 'rid', 'outcome'],
    properties: {
      t: {},
      rid: id,
      outcome: {
        type: 'object',
        required: ['kind'],
        properties: { kind: { enum: ['result', 'tool_error', 'crash', 'unavailable', 'stopped', 'lost'] }, code: { type: 'string', maxLength: 200 }, message: text, retriable: { type: 'boolean' }, detail: text },
        allOf: [
          { if: { properties: { kind: { const: 'tool_error' } } }, then: { required: ['code', 'message', 'retriable'] } },
          { if: { properties: { kind: { const: 'crash' } } }, then: { required: ['detail'] } },
        ],
      },
    },
  },
  hook_result: { type: 'object', required: ['t', 'hid', 'ok'], properties: { t: {}, hid: id, ok: { type: 'boolean' }, detail: text } },
  service: {
    type: 'object',
    required: ['t', 'sid', 'rid', 'group', 'method', 'args'],
    properties: { t: {}, sid: id, rid: { anyOf: [id, { type: 'null' }] }, group: { anyOf: [id, { type: 'null' }] }, method: { type: 'string', maxLength: 100 }, args: { type: 'object' } },
  },
  publish: {
    type: 'object',
    required: ['t', 'id', 'topic', 'group', 'payload'],
    properties: { t: {}, id: { type: 'integer' }, topic: { type: 'string', maxLength: 200 }, group: id, payload: { type: 'object' }, key: { type: 'string', maxLength: 500 } },
  },
  pong: { type: 'object', required: ['t', 'n'], properties: { t: {}, n: { type: 'integer' } } },
  stopped: { type: 'object', required: ['t', 'outcome'], properties: { t: {}, outcome: { enum: ['clean', 'timeout', 'error'] }, detail: text } },
};
const ajv = createAjv();
const validators = new Map(Object.entries(shapes).map(([t, schema]) => [t, ajv.compile(schema)]));

/** Deeper than `max` (arrays and objects), counted without recursion: the value is the plugin's. */
export function deeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

/** Why a parsed line is not a message a runner may send, or null. */
export function refusal(value: unknown): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not a JSON object';
  const t = (value as { t?: unknown }).t;
  const validate = typeof t === 'string' ? validators.get(t) : undefined;
  if (!validate) return `unknown message type ${JSON.stringify(t)?.slice(0, 50)}`;
  if (deeperThan(value, MAX_DEPTH)) return `nested deeper than ${MAX_DEPTH}`;
  if (!validate(value)) {
    const error = validate.errors?.[0];
    return `"${t}" message: ${error?.instancePath || '(root)'} ${error?.message ?? 'invalid'}`;
  }
  return null;
}

export class RunnerChannel {
  /** Lines sent in this turn of the event loop, not yet written (their length counts as unread). */
  private out: string[] = [];
  private outLength = 0;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private tokens = MESSAGE_BURST;
  private refilledAt = Date.now();
  private resumeTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly socket: Socket,
    private readonly events: ChannelEvents,
  ) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    // The process's end closes it; its exit handler says why.
    socket.on('error', () => undefined);
  }

  /** False when not sent: the channel is closed, or the plugin has left too much unread (a fault). */
  send(message: SupervisorToRunner): boolean {
    if (this.closed || this.socket.destroyed) return false;
    if (this.socket.writableLength + this.outLength > MAX_UNREAD_BYTES) {
      this.fail({ code: 'UNREAD_BACKLOG', detail: `it left more than ${MAX_UNREAD_BYTES} bytes of the host's messages unread` });
      return false;
    }
    const line = `${JSON.stringify(message)}\n`;
    // The requests of one batch from the core (and anything else said in this turn) leave
    // in one write: one system call and one wake-up of the plugin's process, not one each.
    if (this.out.push(line) === 1) setImmediate(this.flush);
    this.outLength += line.length;
    return true;
  }

  private readonly flush = (): void => {
    const text = this.out.length === 1 ? this.out[0] : this.out.join('');
    this.out = [];
    this.outLength = 0;
    if (!this.closed && !this.socket.destroyed) this.socket.write(text);
  };

  close(): void {
    this.closed = true;
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    this.socket.destroy();
  }

  private fail(fault: ChannelFault): void {
    if (this.closed) return;
    this.close();
    this.events.fault(fault);
  }

  private read(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1 && !this.closed; nl = chunk.indexOf(10, start)) {
      const part = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.pendingBytes + part.length > MAX_MESSAGE_BYTES) return this.tooLarge();
      const line = this.pending.length === 0 ? part : Buffer.concat([...this.pending, part]);
      this.pending = [];
      this.pendingBytes = 0;
      this.line(line);
    }
    if (this.closed || start >= chunk.length) return;
    const rest = chunk.subarray(start);
    if (this.pendingBytes + rest.length > MAX_MESSAGE_BYTES) return this.tooLarge();
    // A copy: the rest of a large read must not keep the whole chunk alive.
    this.pending.push(Buffer.from(rest));
    this.pendingBytes += rest.length;
  }

  private tooLarge(): void {
    this.fail({ code: 'MESSAGE_TOO_LARGE', detail: `it sent a message over ${MAX_MESSAGE_BYTES} bytes` });
  }

  private line(line: Buffer): void {
    let value: unknown;
    try {
      value = JSON.parse(line.toString('utf8'));
    } catch {
      return this.fail({ code: 'MALFORMED_MESSAGE', detail: 'it sent a line that is not JSON' });
    }
    const why = refusal(value);
    if (why) return this.fail({ code: 'MALFORMED_MESSAGE', detail: `it sent a malformed message (${why})` });
    // Answers are bounded by what the host asks; only what a plugin sends of its own
    // accord (publish, service calls, answers to nothing) is held to the rate.
    if (!this.events.message(value as RunnerToSupervisor)) this.spend();
  }

  /** A token per message; none left: stop reading until one is back (the plugin's writes wait in its own memory). */
  private spend(): void {
    const now = Date.now();
    this.tokens = Math.min(MESSAGE_BURST, this.tokens + ((now - this.refilledAt) * MESSAGES_PER_SECOND) / 1000);
    this.refilledAt = now;
    this.tokens -= 1;
    if (this.tokens >= 0 || this.resumeTimer || this.closed) return;
    const pausedMs = Math.ceil(((1 - this.tokens) * 1000) / MESSAGES_PER_SECOND);
    this.socket.pause();
    this.events.throttled(pausedMs);
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = null;
      if (!this.closed) this.socket.resume();
    }, pausedMs);
  }
}
