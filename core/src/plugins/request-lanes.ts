// Requests straight to a plugin's process, past the plugin host (issue 34): each process
// wake-up costs ~0.1 ms on a small VM, and a request through the host crossed two
// processes more than one into the plugin itself. The host stays the supervisor: it
// connects a lane for each process it starts, vouches for it (`hello` with the token the
// core gave it over the host link) and hands the connection to the process. The core
// sends requests and cancels on it; the process may send nothing but the answer to a
// request the core sent on that lane. Anything else, a line too large, or a backlog it
// does not read, closes the lane (the plugin's requests go through the host again) and is
// reported. A lane that closes answers its requests "unknown", as a host that dies does.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { refusal } from '../../plugin-host/runner-channel.js';
import type { CoreToLane, HandlerOutcome, LaneHello, LaneToCore } from './host-protocol.js';
import { PLUGIN_NAME_PATTERN } from './manifest.js';

/** The core's own bound on a response is 1 MB; a line may carry its JSON escaping. */
export const MAX_LANE_LINE = 4 * 1024 * 1024;
/** What may wait for a process to read before the lane counts as not read. */
export const MAX_LANE_BACKLOG = 16 * 1024 * 1024;
/** The host's hello: small, and said at once. */
const MAX_HELLO = 1024;
const HELLO_WITHIN_MS = 5000;
/** Requests a lane remembers having sent (the oldest forgotten: a late answer to one closes the lane). */
const MAX_SENT = 10_000;

export interface LaneEvents {
  response(plugin: string, rid: string, outcome: HandlerOutcome): void;
  /** The lane closed: these requests sent on it have no answer. */
  lost(plugin: string, rids: string[]): void;
  /** The process broke the lane's rules: the lane is closed. */
  fault(plugin: string, detail: string): void;
}

/** Reads JSON lines of at most `max` bytes; false from `take` stops reading. */
function lines(socket: Socket, max: number, take: (line: string) => boolean, tooLong: () => void): void {
  let pending: Buffer[] = [];
  let size = 0;
  socket.on('data', (chunk: Buffer) => {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const part = chunk.subarray(start, nl);
      start = nl + 1;
      if (size + part.length > max) return tooLong();
      const line = pending.length === 0 ? part : Buffer.concat([...pending, part]);
      pending = [];
      size = 0;
      if (!take(line.toString('utf8'))) return;
    }
    if (start >= chunk.length) return;
    if (size + chunk.length - start > max) return tooLong();
    pending.push(Buffer.from(chunk.subarray(start)));
    size += chunk.length - start;
  });
}

class Lane {
  /** Requests sent on this lane and not answered yet, oldest first. */
  readonly sent = new Set<string>();
  private closed = false;

  constructor(
    readonly plugin: string,
    private readonly socket: Socket,
    private readonly events: LaneEvents,
    private readonly gone: (lane: Lane) => void,
  ) {
    lines(socket, MAX_LANE_LINE, (line) => this.take(line), () => this.fail(`a line over ${MAX_LANE_LINE} bytes on its request lane`));
    socket.on('close', () => this.close());
    socket.on('error', () => undefined);
  }

  send(message: CoreToLane): boolean {
    if (this.closed) return false;
    if (this.socket.writableLength > MAX_LANE_BACKLOG) {
      this.fail(`it left more than ${MAX_LANE_BACKLOG} bytes of its request lane unread`);
      return false;
    }
    if (message.t === 'request') {
      this.sent.add(message.rid);
      if (this.sent.size > MAX_SENT) this.sent.delete(this.sent.values().next().value as string);
    }
    this.socket.write(`${JSON.stringify(message)}\n`);
    return true;
  }

  private take(line: string): boolean {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return this.fail('a line that is not JSON on its request lane');
    }
    // The host's own checks of what a plugin says (size above, depth, shape).
    const why = (value as { t?: unknown } | null)?.t !== 'response' ? 'a message other than a response' : refusal(value);
    if (why) return this.fail(`${why} on its request lane`);
    const { rid, outcome } = value as LaneToCore;
    if (!this.sent.delete(rid)) return this.fail('an answer to a request not sent on its lane');
    this.events.response(this.plugin, rid, outcome);
    return true;
  }

  private fail(detail: string): false {
    if (!this.closed) {
      this.events.fault(this.plugin, detail);
      this.close();
    }
    return false;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.gone(this);
    if (this.sent.size > 0) this.events.lost(this.plugin, [...this.sent]);
    this.sent.clear();
  }
}

export class RequestLanes {
  /** Given to the host over its link; a lane's hello must carry it. */
  readonly token = randomBytes(24).toString('hex');
  private readonly lanes = new Map<string, Lane>();
  private server: Server | null = null;

  constructor(private readonly events: LaneEvents) {}

  async open(path: string): Promise<void> {
    rmSync(path, { force: true });
    const server = createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(path, resolve));
    // Only the plugin host (root, or the core's own user) may connect; never a plugin's uid.
    chmodSync(path, 0o600);
    this.server = server;
  }

  /** True when sent on the plugin's lane; false: it has none (send through the host). */
  send(plugin: string, message: CoreToLane): boolean {
    return this.lanes.get(plugin)?.send(message) ?? false;
  }

  async close(): Promise<void> {
    for (const lane of [...this.lanes.values()]) lane.close();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** A new connection is nobody's until its first line: the host's hello with the token, for one plugin. */
  private accept(socket: Socket): void {
    const timer = setTimeout(() => socket.destroy(), HELLO_WITHIN_MS);
    socket.on('error', () => undefined);
    socket.once('close', () => clearTimeout(timer));
    let said = false;
    lines(
      socket,
      MAX_HELLO,
      (line) => {
        if (said) return true; // the lane's own reader takes over from the next chunk
        said = true;
        clearTimeout(timer);
        socket.removeAllListeners('data');
        const hello = this.hello(line);
        if (!hello) {
          socket.destroy();
          return false;
        }
        // A process started again: its old lane (if still open) goes, with what it held.
        this.lanes.get(hello.plugin)?.close();
        const lane = new Lane(hello.plugin, socket, this.events, (l) => this.lanes.get(l.plugin) === l && this.lanes.delete(l.plugin));
        this.lanes.set(hello.plugin, lane);
        return false;
      },
      () => socket.destroy(),
    );
  }

  private hello(line: string): LaneHello | null {
    let value: Partial<LaneHello>;
    try {
      value = JSON.parse(line) as Partial<LaneHello>;
    } catch {
      return null;
    }
    if (value?.t !== 'lane' || typeof value.plugin !== 'string' || !PLUGIN_NAME_PATTERN.test(value.plugin) || typeof value.token !== 'string') return null;
    const given = Buffer.from(value.token);
    const want = Buffer.from(this.token);
    return given.length === want.length && timingSafeEqual(given, want) ? (value as LaneHello) : null;
  }
}
