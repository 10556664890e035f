// The plugin host's end of the core's event bus (bus-out.sock): each event addressed
// "<plugin> <topic>" goes to that plugin's process; a plugin's subscriptions come and go
// with its process. The core's marker after its last events (BUS_DRAINED) is noted, so
// that a shutdown does not overtake what the core published just before it.
import * as zmq from 'zeromq';
import { BUS_DRAINED } from '../src/plugins/host-protocol.js';
import type { EventEnvelope } from '../src/protocol/envelope.js';

/** How long a shutdown from the core waits for the core's last events (BUS_DRAINED). */
const BUS_DRAINED_WAIT_MS = 2000;

export class BusSubscriber {
  private readonly sub = new zmq.Subscriber({ linger: 0 });
  private drainedSeen!: () => void;
  private readonly drainedMarker = new Promise<void>((resolve) => (this.drainedSeen = resolve));

  connect(endpoint: string): void {
    this.sub.connect(endpoint);
    this.sub.subscribe(BUS_DRAINED);
  }

  subscribe(prefixes: string[]): void {
    for (const prefix of prefixes) this.sub.subscribe(prefix);
  }

  unsubscribe(prefixes: string[]): void {
    for (const prefix of prefixes) this.sub.unsubscribe(prefix);
  }

  /** Hands each event to `deliver` (its plugin and envelope) until the socket closes. */
  async receive(deliver: (plugin: string, envelope: EventEnvelope) => void): Promise<void> {
    try {
      for await (const [address, body] of this.sub) {
        if (address.toString('utf8') === BUS_DRAINED) {
          this.drainedSeen();
          continue;
        }
        const plugin = address.toString('utf8').split(' ', 1)[0];
        try {
          deliver(plugin, JSON.parse(body.toString('utf8')) as EventEnvelope);
        } catch {
          continue;
        }
      }
    } catch (err) {
      if (!this.sub.closed) throw err;
    }
  }

  /**
   * Until the core's marker after its last events has come over the bus (bounded: an older
   * core sends none), so that a shutdown does not overtake what the core published just
   * before it (the link and the bus are two sockets, with no order between them).
   */
  drained(): Promise<void> {
    return Promise.race([this.drainedMarker, new Promise<void>((r) => setTimeout(r, BUS_DRAINED_WAIT_MS).unref())]);
  }

  close(): void {
    this.sub.close();
  }
}
