// zeromq v6 allows one send in flight per socket; this serializes them without
// blocking the caller's receive loop.

/**
 * One part of a message. What the core and the host write themselves goes as a string:
 * zeromq copies a string into its message, but lends a Buffer of over 128 bytes to its
 * I/O thread and takes it back through an async call to the main thread, a wake-up for
 * every such send (and the Buffer was one more copy of the text).
 */
export type Frame = Buffer | string;

export class SendQueue {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly send: (frames: Frame[]) => Promise<void>) {}

  push(frames: Frame[]): Promise<void> {
    const next = this.tail.then(() => this.send(frames));
    // A failed send (peer gone) must not poison later sends.
    this.tail = next.catch(() => undefined);
    return next;
  }
}
