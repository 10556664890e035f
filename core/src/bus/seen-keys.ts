// The most recent event keys, oldest forgotten first: enough to recognise an event a
// plugin publishes again after a crash, bounded whatever a plugin sends.
export class SeenKeys {
  private readonly keys = new Set<string>();

  constructor(private readonly capacity: number) {}

  /** True the first time a key is offered (while it is remembered), false for a repeat. */
  first(key: string): boolean {
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    if (this.keys.size > this.capacity) this.keys.delete(this.keys.values().next().value as string);
    return true;
  }
}
