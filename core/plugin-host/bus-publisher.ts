// Plugin → core events (message.inbound, task.*) on the bus. A plain PUB drops what it
// sends while no subscriber is there: at start-up, before the core's subscription has
// arrived, and while the core restarts. A Telegram message published then would be lost
// for good, its update offset already saved. An XPUB sees the core's subscription come
// and go, so events wait (in order, bounded) until it is there.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as zmq from 'zeromq';
import { SendQueue } from '../src/boundary/send-queue.js';

/** Held events beyond this are dropped oldest first, so a long core outage cannot exhaust memory. */
const MAX_HELD = 10_000;

export class BusPublisher {
  // immediate: a connection that ends (a core killed with -9 says no goodbye) takes its
  // pipe and subscription with it, so the loss arrives here as an unsubscription; without
  // it the pipe outlives the connection and swallows what is published meanwhile.
  private readonly xpub = new zmq.XPublisher({ linger: 0, immediate: true });
  private readonly queue = new SendQueue((frames) => this.xpub.send(frames));
  private held: Buffer[][] = [];
  private subscribed = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(private readonly onDropped: () => void) {}

  connect(endpoint: string): void {
    this.xpub.connect(endpoint);
    this.loop = this.watch();
  }

  publish(frames: Buffer[]): void {
    if (this.subscribed) {
      void this.queue.push(frames).catch(() => undefined);
      return;
    }
    this.held.push(frames);
    if (this.held.length > MAX_HELD) {
      this.held.shift();
      this.onDropped();
    }
  }

  /** Subscription messages: first byte 1 when the core (re)subscribes, 0 when it has gone. */
  private async watch(): Promise<void> {
    try {
      for await (const [message] of this.xpub) {
        this.subscribed = message[0] === 1;
        if (!this.subscribed) continue;
        const held = this.held;
        this.held = [];
        for (const frames of held) this.publish(frames);
      }
    } catch (err) {
      if (!this.xpub.closed) throw err;
    }
  }

  /**
   * Events still held, written to `file` (when there are any) for the next plugin host to
   * publish: a host that exits while its core is away must not lose them. Synchronous,
   * for use on the way out.
   */
  saveHeld(file: string): number {
    if (this.held.length === 0) return 0;
    writeFileSync(file, JSON.stringify(this.held.map((frames) => frames.map((f) => f.toString('utf8')))), { mode: 0o600 });
    return this.held.length;
  }

  /** Events an earlier host saved: held first, before anything published from now on. */
  restoreHeld(file: string): number {
    let saved: unknown;
    try {
      saved = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      return 0; // none saved (or unreadable: nothing to restore)
    } finally {
      rmSync(file, { force: true });
    }
    if (!Array.isArray(saved)) return 0;
    const frames = saved.filter((e): e is string[] => Array.isArray(e) && e.every((f) => typeof f === 'string')).map((e) => e.map((f) => Buffer.from(f)));
    for (const event of frames) this.publish(event);
    return frames.length;
  }

  async close(): Promise<void> {
    this.xpub.close();
    await this.loop.catch(() => undefined);
  }
}
