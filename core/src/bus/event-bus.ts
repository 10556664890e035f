// The event bus: plugins publish into the core's SUB socket; the core republishes on its
// PUB socket addressed per plugin ("<plugin> <topic>"), so a plugin only ever receives
// events for groups the core decided it may see.
import * as zmq from 'zeromq';
import { SendQueue } from '../boundary/send-queue.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import type { PublishedEvent } from '../plugins/host-protocol.js';

export type PublishedHandler = (topic: string, event: PublishedEvent) => void;

export class EventBus {
  private readonly pub = new zmq.Publisher({ linger: 0 });
  private readonly sub = new zmq.Subscriber({ linger: 0, maxMessageSize: 2 * 1024 * 1024 });
  private readonly queue = new SendQueue((frames) => this.pub.send(frames));
  private loop: Promise<void> = Promise.resolve();

  async open(outEndpoint: string, inEndpoint: string, onPublished: PublishedHandler): Promise<void> {
    await this.pub.bind(outEndpoint);
    await this.sub.bind(inEndpoint);
    this.sub.subscribe();
    this.loop = this.receive(onPublished);
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

  deliver(plugin: string, envelope: EventEnvelope): Promise<void> {
    return this.queue.push([Buffer.from(`${plugin} ${envelope.topic}`), Buffer.from(JSON.stringify(envelope))]);
  }

  async close(): Promise<void> {
    this.pub.close();
    this.sub.close();
    await this.loop.catch(() => undefined);
  }
}
