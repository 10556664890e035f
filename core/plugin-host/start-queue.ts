// Events for a plugin whose process is starting (or waiting to start again after a crash):
// kept in order, bounded, and handed over once it is ready, so that what the core published
// meanwhile (a notice, a confirmation prompt, a task's failure) is not lost to a restart.
// Past the bounds the oldest go first, and are counted.
import type { EventEnvelope } from '../src/protocol/envelope.js';

export const MAX_QUEUED_EVENTS = 100;
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

export class StartQueue {
  private events: { envelope: EventEnvelope; bytes: number }[] = [];
  private bytes = 0;
  private dropped = 0;

  add(envelope: EventEnvelope): void {
    const bytes = JSON.stringify(envelope).length;
    this.events.push({ envelope, bytes });
    this.bytes += bytes;
    while (this.events.length > MAX_QUEUED_EVENTS || (this.bytes > MAX_QUEUED_BYTES && this.events.length > 0)) {
      this.bytes -= this.events.shift()!.bytes;
      this.dropped++;
    }
  }

  /** What was kept, oldest first, and how many were dropped; the queue is empty after. */
  take(): { envelopes: EventEnvelope[]; dropped: number } {
    const taken = { envelopes: this.events.map((e) => e.envelope), dropped: this.dropped };
    this.events = [];
    this.bytes = 0;
    this.dropped = 0;
    return taken;
  }
}
