// The event bus: plugins publish into the core's SUB socket; the core republishes on its
// XPUB socket addressed per plugin ("<plugin> <topic>"), so a plugin only ever receives
// events for groups the core decided it may see. A plain PUB drops what it sends before a
// subscription has arrived: right after a core restart the plugin host answers `init`
// over its link before its SUB has reconnected, and a notice or a confirmation prompt
// sent then was lost. The XPUB sees each plugin's subscriptions come and go; events for a
// plugin with none wait (in order, bounded) until it subscribes. Events for a plugin that
// is not running (its host just died, it is starting again) wait too, whatever the XPUB
// still believes: a host's death reaches the link a moment before its subscriptions end,
// and an event sent then was dropped. They go once it subscribes or is ready (`release`).
import * as zmq from 'zeromq';
import { SendQueue } from '../boundary/send-queue.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import { BUS_DRAINED, type PublishedEvent } from '../plugins/host-protocol.js';

export type PublishedHandler = (topic: string, event: PublishedEvent) => void;

/** Events held per plugin while it has no subscription; the oldest go first beyond these. */
const MAX_HELD_PER_PLUGIN = 1000;
const MAX_HELD_BYTES_PER_PLUGIN = 16 * 1024 * 1024;

const size = (frames: Buffer[]): number => frames[0].length + frames[1].length;

export class EventBus {
  private readonly pub = new zmq.XPublisher({ linger: 0 });
  /** Subscriptions in force ("<plugin> <prefix>"), as the XPUB reports them. */
  private readonly subscriptions = new Set<string>();
  private readonly held = new Map<string, Buffer[][]>();
  private readonly sub = new zmq.Subscriber({ linger: 0, maxMessageSize: 2 * 1024 * 1024 });
  private readonly queue = new SendQueue((frames) => this.pub.send(frames));
  private loop: Promise<void> = Promise.resolve();

  async open(outEndpoint: string, inEndpoint: string, onPublished: PublishedHandler): Promise<void> {
    await this.pub.bind(outEndpoint);
    await this.sub.bind(inEndpoint);
    this.sub.subscribe();
    this.loop = Promise.all([this.receive(onPublished), this.watch()]).then(() => undefined);
  }

  /** Subscription messages: first byte 1 subscribes "<plugin> <prefix>", 0 (its last subscriber gone) ends it. */
  private async watch(): Promise<void> {
    try {
      for await (const [message] of this.pub) {
        const topic = message.subarray(1).toString('utf8');
        if (message[0] !== 1) {
          this.subscriptions.delete(topic);
          continue;
        }
        this.subscriptions.add(topic);
        // Only what this subscription covers: a plugin's prefixes arrive one at a time.
        const plugin = topic.slice(0, topic.indexOf(' '));
        const held = this.held.get(plugin) ?? [];
        const ready = held.filter(([address]) => address.toString('utf8').startsWith(topic));
        this.held.set(plugin, held.filter((frames) => !ready.includes(frames)));
        for (const frames of ready) void this.queue.push(frames).catch(() => undefined);
      }
    } catch (err) {
      if (!this.pub.closed) throw err;
    }
  }

  private covered(address: string): boolean {
    for (const topic of this.subscriptions) if (address.startsWith(topic)) return true;
    return false;
  }

  private async receive(onPublished: PublishedHandler): Promise<void> {
    try {
      for await (const [topic, body] of this.sub) {
        if (!topic || !body) continue;
        let event: PublishedEvent;
        try {
          event = JSON.parse(body.toString('utf8')) as PublishedEvent;
        } catch {
          continue;
        }
        onPublished(topic.toString('utf8'), event);
      }
    } catch (err) {
      if (!this.sub.closed) throw err;
    }
  }

  /** `ready`: the plugin runs (the catalog says healthy); otherwise the event waits for `release` or its subscription. */
  deliver(plugin: string, envelope: EventEnvelope, ready = true): Promise<void> {
    const address = `${plugin} ${envelope.topic}`;
    const frames = [Buffer.from(address), Buffer.from(JSON.stringify(envelope))];
    if (ready && this.covered(address)) return this.queue.push(frames);
    const held = this.held.get(plugin) ?? [];
    held.push(frames);
    let bytes = held.reduce((sum, f) => sum + size(f), 0);
    while (held.length > MAX_HELD_PER_PLUGIN || (bytes > MAX_HELD_BYTES_PER_PLUGIN && held.length > 1)) bytes -= size(held.shift()!);
    this.held.set(plugin, held);
    return Promise.resolve();
  }

  /** The plugin runs again: what waits for it and its subscriptions cover goes now, in order. */
  release(plugin: string): void {
    const held = this.held.get(plugin) ?? [];
    const ready = held.filter(([address]) => this.covered(address.toString('utf8')));
    this.held.set(plugin, held.filter((frames) => !ready.includes(frames)));
    for (const frames of ready) void this.queue.push(frames).catch(() => undefined);
  }

  /** The marker after everything delivered so far (BUS_DRAINED), for the plugin host. */
  drained(): Promise<void> {
    return this.queue.push([Buffer.from(BUS_DRAINED), Buffer.from('{}')]);
  }

  async close(): Promise<void> {
    this.pub.close();
    this.sub.close();
    await this.loop.catch(() => undefined);
  }
}
