// What a run printed, kept to a bound whatever it prints: the first part and the last
// part of each stream (a traceback comes last), with a note of how many bytes were cut in
// between. The core never holds more than the bound, however much a run writes.

/** Bytes kept of each stream: HEAD from its start, TAIL from its end. */
export const HEAD_BYTES = 48 * 1024;
export const TAIL_BYTES = 16 * 1024;
export const KEPT_BYTES = HEAD_BYTES + TAIL_BYTES;

export class BoundedOutput {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  /** The last TAIL_BYTES seen after the head filled, as chunks (oldest first). */
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** Everything the stream carried. */
  total = 0;

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headBytes < HEAD_BYTES) {
      const take = Buffer.from(chunk.subarray(0, HEAD_BYTES - this.headBytes));
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
      if (chunk.length === 0) return;
    }
    if (chunk.length >= TAIL_BYTES) {
      this.tail = [Buffer.from(chunk.subarray(chunk.length - TAIL_BYTES))];
      this.tailBytes = TAIL_BYTES;
      return;
    }
    this.tail.push(Buffer.from(chunk));
    this.tailBytes += chunk.length;
    while (this.tailBytes - this.tail[0].length >= TAIL_BYTES) this.tailBytes -= this.tail.shift()!.length;
  }

  /** The text kept (UTF-8, a character split at a cut shown as U+FFFD) and the bytes cut from its middle. */
  result(): { text: string; cut: number } {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > TAIL_BYTES) tail = tail.subarray(tail.length - TAIL_BYTES);
    const cut = this.total - head.length - tail.length;
    if (cut === 0) return { text: Buffer.concat([head, tail]).toString('utf8'), cut: 0 };
    return { text: `${head.toString('utf8')}\n[… ${cut} bytes cut …]\n${tail.toString('utf8')}`, cut };
  }
}
