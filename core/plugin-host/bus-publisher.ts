// Plugin → core events (message.inbound, task.*) on the bus. A plain PUB drops what it
// sends while no subscriber is there: at start-up, before the core's subscription has
// arrived, and while the core restarts. A Telegram message published then would be lost
// for good, its update offset already saved. An XPUB sees the core's subscription come
// and go, so events wait (in order, bounded) until it is there.
import * as zmq from 'zeromq';
import { SendQueue } from '../src/boundary/send-queue.js';

/** Held events beyond this are dropped oldest first, so a long core outage cannot exhaust memory. */
const MAX_HELD = 10_000;

export class BusPublisher {
  private readonly xpub = new zmq.XPublisher({ linger: 0 });
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

  async close(): Promise<void> {
    this.xpub.close();
    await this.loop.catch(() => undefined);
  }
}
