// Plugin → core events (message.inbound, task.*) on the bus. An event counts as delivered
// only when the core says so (`received`, after it accepted the event or refused it for
// good): until then it is kept here and sent again to a core that (re)subscribes, or that
// stays silent, and the plugin is not told it may save its progress. A Telegram update
// whose offset was saved while its event sat in a host killed with -9 was lost for good.
// An XPUB sees the core's subscription come and go, so nothing is sent into the void.
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as zmq from 'zeromq';
import { SendQueue } from '../src/boundary/send-queue.js';
import { formatVersion } from '../src/state/versioned-json.js';

/** Unconfirmed events kept per plugin; beyond it the oldest are given up, so a flood costs that plugin, not memory. */
const MAX_UNCONFIRMED_PER_PLUGIN = 1000;
/** An event the core has not confirmed this long after it was sent goes again (the core refuses a repeat). */
const RESEND_AFTER_MS = 10_000;

interface Unconfirmed {
  frames: Buffer[];
  /** When it was last sent (0: not yet). */
  sentAt: number;
  /** `held`: the core keeps it for a configuration that allows it (why). */
  confirmed: (held?: string) => void;
}

export class BusPublisher {
  // immediate: a connection that ends (a core killed with -9 says no goodbye) takes its
  // pipe and subscription with it, so the loss arrives here as an unsubscription.
  // noDrop: a core slow to read makes sends wait rather than vanish.
  private readonly xpub = new zmq.XPublisher({ linger: 0, immediate: true, noDrop: true });
  private readonly queue = new SendQueue((frames) => this.xpub.send(frames));
  /** Per plugin, by the host's id for each event, in publishing order. */
  private readonly unconfirmed = new Map<string, Map<string, Unconfirmed>>();
  private subscribed = false;
  private loop: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly onGivenUp: (plugin: string) => void) {}

  connect(endpoint: string): void {
    this.xpub.connect(endpoint);
    this.loop = this.watch();
    this.timer = setInterval(() => this.resend(Date.now() - RESEND_AFTER_MS), RESEND_AFTER_MS / 2).unref();
  }

  /** `frames` carry `id` in their body (PublishedEvent.id); `confirmed` runs once the core has the event. */
  publish(plugin: string, id: string, frames: Buffer[], confirmed: (held?: string) => void = () => undefined): void {
    const events = this.unconfirmed.get(plugin) ?? new Map<string, Unconfirmed>();
    this.unconfirmed.set(plugin, events);
    const event: Unconfirmed = { frames, sentAt: 0, confirmed };
    events.set(id, event);
    if (events.size > MAX_UNCONFIRMED_PER_PLUGIN) {
      const [oldest, given] = events.entries().next().value as [string, Unconfirmed];
      events.delete(oldest);
      given.confirmed();
      this.onGivenUp(plugin);
    }
    if (this.subscribed) this.send(event);
  }

  /** The core's `received`: the event is its now (`held`: kept until the configuration allows it). */
  received(id: string, held?: string): void {
    for (const events of this.unconfirmed.values()) {
      const event = events.get(id);
      if (!event) continue;
      events.delete(id);
      event.confirmed(held);
      return;
    }
  }

  private send(event: Unconfirmed): void {
    event.sentAt = Date.now();
    void this.queue.push(event.frames).catch(() => undefined);
  }

  /** Everything unconfirmed sent before `before`, in order (0: nothing; Infinity: all). */
  private resend(before: number): void {
    if (!this.subscribed) return;
    for (const events of this.unconfirmed.values()) for (const event of events.values()) if (event.sentAt < before) this.send(event);
  }

  /** Subscription messages: first byte 1 when a core (re)subscribes, 0 when it has gone. */
  private async watch(): Promise<void> {
    try {
      for await (const [message] of this.xpub) {
        this.subscribed = message[0] === 1;
        // A new core knows nothing of what the last one did not confirm.
        this.resend(Infinity);
      }
    } catch (err) {
      if (!this.xpub.closed) throw err;
    }
  }

  /**
   * Events the core has not confirmed, written to `file` (when there are any) for the next
   * plugin host to publish: a host that exits while its core is away must not lose them.
   * Synchronous, for use on the way out.
   */
  saveUnconfirmed(file: string): number {
    const all = [...this.unconfirmed.values()].flatMap((events) => [...events.values()].map((e) => e.frames.map((f) => f.toString('utf8'))));
    if (all.length > 0) writeFileSync(file, JSON.stringify({ version: 1, events: all }), { mode: 0o600 });
    return all.length;
  }

  /** Events an earlier host saved: sent first, before anything published from now on. */
  restoreUnconfirmed(file: string): number {
    let saved: unknown;
    try {
      saved = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      return 0; // none saved (or unreadable: nothing to restore)
    } finally {
      rmSync(file, { force: true });
    }
    // Version 1 is `{version, events}`; version 0 was the list alone. A newer one is not ours to read.
    const events = Array.isArray(saved) ? saved : formatVersion(saved) === 1 ? (saved as { events?: unknown }).events : null;
    if (!Array.isArray(events)) return 0;
    let restored = 0;
    for (const entry of events) {
      if (!Array.isArray(entry) || entry.length !== 2 || !entry.every((f) => typeof f === 'string')) continue;
      let body: { plugin?: unknown; id?: unknown };
      try {
        body = JSON.parse(entry[1]) as typeof body;
      } catch {
        continue;
      }
      if (typeof body !== 'object' || body === null || typeof body.plugin !== 'string') continue;
      // A file from before events had ids: named now, so the core can confirm it.
      const id = typeof body.id === 'string' ? body.id : randomUUID();
      this.publish(body.plugin, id, [Buffer.from(entry[0]), Buffer.from(JSON.stringify({ ...body, id }))]);
      restored++;
    }
    return restored;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.xpub.close();
    await this.loop.catch(() => undefined);
  }
}
