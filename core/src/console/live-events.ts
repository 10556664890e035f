// Live events for the console's pages as server-sent events: audit entries (scrubbed, as
// written) and agent state changes. Bounded on every side: at most `maxStreams` at once
// (more get 503), and a reader that falls `maxBufferedBytes` behind is cut off rather
// than buffered without limit; a comment line every `heartbeatMs` finds dead peers.
import type { ServerResponse } from 'node:http';
import type { AgentState } from '../agents/agent-states.js';
import type { AuditEntry } from '../audit/audit-log.js';

export type LiveEvent = ({ type: 'audit' } & AuditEntry) | ({ type: 'agent' } & AgentState);

export interface LiveEventLimits {
  maxStreams: number;
  maxBufferedBytes: number;
  heartbeatMs: number;
}

export const LIVE_EVENT_LIMITS: LiveEventLimits = { maxStreams: 16, maxBufferedBytes: 1 << 20, heartbeatMs: 15_000 };

interface Stream {
  res: ServerResponse;
  group: string | null;
}

export class LiveEvents {
  private readonly streams = new Set<Stream>();
  private readonly heartbeat: NodeJS.Timeout;
  /** Streams cut off for reading too slowly (tests and the overview read it). */
  dropped = 0;

  constructor(private readonly limits: LiveEventLimits = LIVE_EVENT_LIMITS) {
    this.heartbeat = setInterval(() => this.broadcast(': keep-alive\n\n', null), limits.heartbeatMs);
    this.heartbeat.unref();
  }

  get open(): number {
    return this.streams.size;
  }

  /** Takes over `res` as an event stream (only one group's events with `group`); false when full. */
  attach(res: ServerResponse, group: string | null): boolean {
    if (this.streams.size >= this.limits.maxStreams) return false;
    const stream: Stream = { res, group };
    this.streams.add(stream);
    res.on('close', () => this.streams.delete(stream));
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    res.write(': connected\n\n');
    return true;
  }

  publish(event: LiveEvent): void {
    if (this.streams.size === 0) return;
    this.broadcast(`data: ${JSON.stringify(event)}\n\n`, event.group);
  }

  /** `group` null: for every stream; otherwise only for streams of that group or of all. */
  private broadcast(text: string, group: string | null): void {
    for (const stream of this.streams) {
      if (group !== null && stream.group !== null && stream.group !== group) continue;
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
