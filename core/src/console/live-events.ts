// Live events for the console's pages as server-sent events: audit entries (scrubbed, as
// written) and agent state changes. Bounded on every side: at most `maxStreams` at once
// (more get 503), and a reader that falls `maxBufferedBytes` behind is cut off rather
// than buffered without limit; a comment line every `heartbeatMs` keeps idle streams open
// through proxies and finds dead peers. Each event has an id (`<boot>.<n>`); a page that
// reconnects with the last id it had (Last-Event-ID, or `since`) gets what it missed from
// the last `replay` events, so each event reaches it once.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { AgentState } from '../agents/agent-states.js';
import type { AuditEntry } from '../audit/audit-log.js';

export type LiveEvent = ({ type: 'audit' } & AuditEntry) | ({ type: 'agent' } & AgentState);

export interface LiveEventLimits {
  maxStreams: number;
  maxBufferedBytes: number;
  heartbeatMs: number;
  /** Recent events kept for a reconnecting page. */
  replay: number;
}

export const LIVE_EVENT_LIMITS: LiveEventLimits = { maxStreams: 16, maxBufferedBytes: 1 << 20, heartbeatMs: 15_000, replay: 500 };

interface Stream {
  res: ServerResponse;
  group: string | null;
}

export class LiveEvents {
  private readonly streams = new Set<Stream>();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly boot = randomBytes(4).toString('hex');
  private seq = 0;
  private readonly recent: { seq: number; group: string | null; text: string }[] = [];
  /** Streams cut off for reading too slowly (tests and the overview read it). */
  dropped = 0;

  constructor(private readonly limits: LiveEventLimits = LIVE_EVENT_LIMITS) {
    this.heartbeat = setInterval(() => this.broadcast(': keep-alive\n\n', null), limits.heartbeatMs);
    this.heartbeat.unref();
  }

  get open(): number {
    return this.streams.size;
  }

  /**
   * Takes over `res` as an event stream (only one group's events with `group`), first
   * replaying what came after the event `since` if it is still kept; false when full.
   */
  attach(res: ServerResponse, group: string | null, since: string | null = null): boolean {
    if (this.streams.size >= this.limits.maxStreams) return false;
    const stream: Stream = { res, group };
    this.streams.add(stream);
    res.on('close', () => this.streams.delete(stream));
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    res.write(': connected\n\n');
    const [boot, n] = (since ?? '').split('.');
    const after = boot === this.boot ? Number(n) : NaN;
    if (Number.isInteger(after)) for (const e of this.recent) if (e.seq > after && visible(stream, e.group)) res.write(e.text);
    return true;
  }

  publish(event: LiveEvent): void {
    const seq = ++this.seq;
    const text = `id: ${this.boot}.${seq}\ndata: ${JSON.stringify(event)}\n\n`;
    this.recent.push({ seq, group: event.group, text });
    if (this.recent.length > this.limits.replay) this.recent.shift();
    if (this.streams.size > 0) this.broadcast(text, event.group);
  }

  /** `group` null: for every stream; otherwise only for streams of that group or of all. */
  private broadcast(text: string, group: string | null): void {
    for (const stream of this.streams) {
      if (!visible(stream, group)) continue;
      if (stream.res.writableLength > this.limits.maxBufferedBytes) {
        this.dropped++;
        this.streams.delete(stream);
        stream.res.destroy();
        continue;
      }
      stream.res.write(text);
    }
  }

  close(): void {
    clearInterval(this.heartbeat);
    for (const stream of this.streams) stream.res.end();
    this.streams.clear();
  }
}

/** An event of `group` (null: of none in particular) is for streams of that group or of all. */
function visible(stream: Stream, group: string | null): boolean {
  return group === null || stream.group === null || stream.group === group;
}
