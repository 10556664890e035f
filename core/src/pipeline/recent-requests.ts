// ipc resends a request with the same correlation after a reconnect (Lazy Pirate). The
// core must not act twice: a repeat within the window gets the first one's answer.
export class RecentRequests<T> {
  private readonly entries = new Map<string, { value: Promise<T>; at: number }>();
  /** When the first entry in the map was set: eviction is only looked at once it is due. */
  private oldestAt = 0;

  constructor(
    // ipc gives up after 35 s by default; results can be large, so keep few.
    private readonly ttlMs = 35_000,
    private readonly capacity = 5_000,
  ) {}

  get(key: string, now = Date.now()): Promise<T> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (now - entry.at > this.ttlMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: Promise<T>, now = Date.now()): void {
    if (this.entries.size === 0) this.oldestAt = now;
    this.entries.set(key, { value, at: now });
    if (this.entries.size <= this.capacity && now - this.oldestAt <= this.ttlMs) return;
    // Map keeps insertion order: the first entries are the oldest.
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.capacity && now - entry.at <= this.ttlMs) {
        this.oldestAt = entry.at;
        return;
      }
      this.entries.delete(oldest);
    }
  }
}
