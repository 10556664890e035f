// Messages for one peer that become ready in the same turn of the event loop leave as
// one ZeroMQ message of one frame: a JSON array of them (a message alone goes as itself).
// Under load this cuts the sends, I/O-thread wake-ups and syscalls on the plugin host
// link; and every frame of over 128 bytes a receiver gets costs it a Buffer with a
// finalizer (zeromq's zero-copy), once per batch rather than once per message. Alone, a
// message waits only for the end of the current turn (before the audit log's write there:
// turn-end.ts).
import { atTurnEnd } from './turn-end.js';

interface Batch {
  /** Each message's JSON text. */
  messages: string[];
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
  return { messages: [], sent, resolve, reject };
}

export class FrameBatch {
  /** The batch waiting for the end of this turn, if any. */
  private batch: Batch | null = null;

  constructor(private readonly send: (frame: string) => Promise<void>) {}

  /** `json`: one message's JSON text. Resolves once its batch has been handed to ZeroMQ. */
  push(json: string): Promise<void> {
    let batch = this.batch;
    if (!batch) {
      batch = this.batch = openBatch();
      atTurnEnd('send', this.flush);
    }
    batch.messages.push(json);
    return batch.sent;
  }

  private readonly flush = (): void => {
    const batch = this.batch!;
    this.batch = null;
    const { messages } = batch;
    this.send(messages.length === 1 ? messages[0] : `[${messages.join(',')}]`).then(batch.resolve, batch.reject);
  };
}

/**
 * The receiving side: each frame is one JSON message, or an array of them (a batch); a
 * frame that does not parse is skipped.
 */
export function parseFrames<T>(frames: Buffer[]): T[] {
  const messages: T[] = [];
  for (const frame of frames) {
    let value: unknown;
    try {
      value = JSON.parse(frame.toString('utf8'));
    } catch {
      continue; // not JSON: nothing to act on
    }
    if (Array.isArray(value)) for (const message of value) messages.push(message as T);
    else messages.push(value as T);
  }
  return messages;
}
