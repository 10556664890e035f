// Messages for one peer that become ready in the same turn of the event loop leave as
// one multipart ZeroMQ message, one JSON message per frame. Under load this cuts the
// sends, I/O-thread wake-ups and syscalls on the plugin host link; alone, a message
// waits only for the end of the current turn.
import type { Frame } from './send-queue.js';

interface Batch {
  frames: Frame[];
  sent: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

function openBatch(): Batch {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const sent = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { frames: [], sent, resolve, reject };
}

export class FrameBatch {
  /** The batch waiting for the end of this turn, if any. */
  private batch: Batch | null = null;

  constructor(private readonly send: (frames: Frame[]) => Promise<void>) {}

  /** Resolves once the message's batch has been handed to ZeroMQ. */
  push(frame: Frame): Promise<void> {
    let batch = this.batch;
    if (!batch) {
      batch = this.batch = openBatch();
      setImmediate(this.flush, batch);
    }
    batch.frames.push(frame);
    return batch.sent;
  }

  private readonly flush = (batch: Batch): void => {
    this.batch = null;
    this.send(batch.frames).then(batch.resolve, batch.reject);
  };
}

/** The receiving side: each frame is one JSON message; a frame that does not parse is skipped. */
export function parseFrames<T>(frames: Buffer[]): T[] {
  const messages: T[] = [];
  for (const frame of frames) {
    try {
      messages.push(JSON.parse(frame.toString('utf8')) as T);
    } catch {
      // not JSON: nothing to act on
    }
  }
  return messages;
}
