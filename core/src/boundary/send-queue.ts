// zeromq v6 allows one send in flight per socket; this serializes them without
// blocking the caller's receive loop.
export class SendQueue {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly send: (frames: Buffer[]) => Promise<void>) {}

  push(frames: Buffer[]): Promise<void> {
    const next = this.tail.then(() => this.send(frames));
    // A failed send (peer gone) must not poison later sends.
    this.tail = next.catch(() => undefined);
    return next;
  }
}
