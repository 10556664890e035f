// Messages for one peer that become ready in the same turn of the event loop leave as
// one multipart ZeroMQ message, one JSON message per frame. Under load this cuts the
// sends, I/O-thread wake-ups and syscalls on the plugin host link; alone, a message
// waits only for the end of the current turn.
export class FrameBatch {
  private frames: Buffer[] = [];
  private settle: { resolve: () => void; reject: (err: unknown) => void } | null = null;
  private sent: Promise<void> = Promise.resolve();

  constructor(private readonly send: (frames: Buffer[]) => Promise<void>) {}

  /** Resolves once the message's batch has been handed to ZeroMQ. */
  push(frame: Buffer): Promise<void> {
    if (this.frames.length === 0) {
      this.sent = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
      setImmediate(this.flush);
    }
    this.frames.push(frame);
    return this.sent;
  }

  private readonly flush = (): void => {
    const { frames, settle } = this;
    this.frames = [];
    this.settle = null;
    this.send(frames).then(settle?.resolve, settle?.reject);
  };
}
