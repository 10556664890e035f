// The entries (iCalendar UIDs) a CalDAV plugin wrote or changed for a session that had read
// external content (DESIGN 16: labels travel with the data). What such a session wrote may
// carry a stranger's words, so whoever reads the entry later gets it labelled external.
// Kept in the plugin's data folder, whole or not at all; bounded, the oldest forgotten first.
import { join } from 'node:path';
import { writeAtomically } from '../src/state/atomic-write.js';
import { readVersionedJson, versionedJsonText } from '../src/state/versioned-json.js';

const FILE = 'labelled-entries.json';
/** About 40 bytes each: the file stays under half a megabyte. */
export const MAX_LABELLED = 10_000;

export class LabelledUids {
  private readonly file: string;
  /** In the order they were labelled (a Set keeps insertion order). */
  private readonly uids = new Set<string>();

  constructor(
    dir: string,
    /** A write that failed (a full disk): the label holds until the process ends. */
    private readonly onWriteError: (err: Error) => void = () => undefined,
  ) {
    this.file = join(dir, FILE);
  }

  /** What an earlier run left. A corrupt file is moved aside (its name returned); a missing one is a first run. */
  load(): { movedAside?: string } {
    const saved = readVersionedJson(this.file, {
      // Version 1 is the first: nothing was kept before it.
      migrations: [(json) => json],
      read: (json) => {
        const uids = (json as { uids?: unknown } | null)?.uids;
        if (!Array.isArray(uids) || !uids.every((u) => typeof u === 'string')) throw new Error('not a list of UIDs');
        return uids as string[];
      },
    });
    if (saved.kind === 'moved') return { movedAside: saved.movedAside };
    for (const uid of saved.kind === 'loaded' ? saved.value.slice(-MAX_LABELLED) : []) this.uids.add(uid);
    return {};
  }

  has(uid: string): boolean {
    return this.uids.has(uid);
  }

  add(uid: string): void {
    this.uids.delete(uid);
    this.uids.add(uid);
    while (this.uids.size > MAX_LABELLED) this.uids.delete(this.uids.values().next().value as string);
    this.save();
  }

  remove(uid: string): void {
    if (this.uids.delete(uid)) this.save();
  }

  private save(): void {
    try {
      writeAtomically(this.file, versionedJsonText(1, { uids: [...this.uids] }), 0o600);
    } catch (err) {
      this.onWriteError(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
