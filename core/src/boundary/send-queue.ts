// zeromq v6 allows one send in flight per socket; this serializes them without
// blocking the caller's receive loop. A send with none in flight is handed to zeromq at
// once, in the caller's turn: zeromq completes a send it can take inside the call, so the
// message is on its way before whatever else the turn does (the audit log's write at its
// end, boundary/turn-end.ts), and no promise stands between the caller and the socket.

/**
 * One part of a message. What the core and the host write themselves goes as a string:
 * zeromq copies a string into its message, but lends a Buffer of over 128 bytes to its
 * I/O thread and takes it back through an async call to the main thread, a wake-up for
 * every such send (and the Buffer was one more copy of the text).
 */
export type Frame = Buffer | string;

export class SendQueue {
  private tail: Promise<void> = Promise.resolve();
  /** Sends handed over or waiting, not yet settled. */
  private unsettled = 0;

  constructor(private readonly send: (frames: Frame[]) => Promise<void>) {}

  push(frames: Frame[]): Promise<void> {
    const next = this.unsettled === 0 ? this.sendNow(frames) : this.tail.then(() => this.send(frames));
    this.unsettled++;
    // A failed send (peer gone) must not poison later sends.
    this.tail = next.then(this.settled, this.settled);
    return next;
  }

  private sendNow(frames: Frame[]): Promise<void> {
    try {
      return this.send(frames);
    } catch (err) {
      return Promise.reject(err); // a closed socket throws; callers see it as a failed send
    }
  }

  private readonly settled = (): void => {
    this.unsettled--;
  };
}
