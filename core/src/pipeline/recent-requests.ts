// ipc resends a request with the same correlation after a reconnect (Lazy Pirate). The
// core must not act twice: a repeat within the window gets the first one's answer.
interface Entry<T> {
  value: Promise<T>;
  at: number;
  /** Size of the answer as sent, once known (weigh). */
  bytes: number;
}

export class RecentRequests<T> {
  private readonly entries = new Map<string, Entry<T>>();
  /**
   * Requests not yet answered. They never expire: a call waiting minutes for a person is
   * resent by ipc after a reconnect and must join, not run again. The window of an entry
   * starts when its answer is sent (weigh). Their number is bounded by what is in flight.
   */
  private readonly unanswered = new Map<string, Promise<T>>();
  /** When the first entry in the map was set: eviction is only looked at once it is due. */
  private oldestAt = 0;
  private bytes = 0;

  constructor(
    // ipc gives up after 35 s by default.
    private readonly ttlMs = 35_000,
    private readonly capacity = 5_000,
    // Answers may be up to 1 MB each: the window keeps at most this much of them. A
    // resend comes within seconds, so only the newest entries matter.
    private readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  get(key: string, now = Date.now()): Promise<T> | undefined {
    const waiting = this.unanswered.get(key);
    if (waiting) return waiting;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (now - entry.at > this.ttlMs) {
      this.entries.delete(key);
      this.bytes -= entry.bytes;
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: Promise<T>): void {
    this.unanswered.set(key, value);
  }

  private put(key: string, value: Promise<T>, now: number): void {
    if (this.entries.size === 0) this.oldestAt = now;
    const previous = this.entries.get(key);
    if (previous) {
      // Re-inserted, so that it is also the newest in the map's order.
      this.entries.delete(key);
      this.bytes -= previous.bytes;
    }
    this.entries.set(key, { value, at: now, bytes: 0 });
    this.evict(now);
  }

  /** Counts the size of the answer sent for `key` against the byte budget. */
  weigh(key: string, bytes: number, now = Date.now()): void {
    const waiting = this.unanswered.get(key);
    if (waiting) {
      this.unanswered.delete(key);
      this.put(key, waiting, now); // its window starts now
    }
    const entry = this.entries.get(key);
    if (!entry) return;
    this.bytes += bytes - entry.bytes;
    entry.bytes = bytes;
    this.evict(now);
  }

  /**
   * In batches: past a bound, down to 15/16 of it (and expired entries once the oldest is
   * a sixteenth of the window past it; get() already ignores them). The Map's iterator
   * walks over every slot deleted before, so dropping one entry per request, at capacity,
   * cost more than the rest of this class.
   */
  private evict(now: number): void {
    if (this.entries.size <= this.capacity && this.bytes <= this.maxBytes && now - this.oldestAt <= this.ttlMs * (17 / 16)) return;
    const capacity = this.capacity - Math.floor(this.capacity / 16);
    const maxBytes = this.maxBytes * (15 / 16);
    // Map keeps insertion order: the first entries are the oldest.
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= capacity && this.bytes <= maxBytes && now - entry.at <= this.ttlMs) {
        this.oldestAt = entry.at;
        return;
      }
      this.entries.delete(key);
      this.bytes -= entry.bytes;
    }
  }
}
