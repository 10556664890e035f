// Where each watched folder's sync stands: its UIDVALIDITY and the last UID handled, in the
// plugin's data folder, replaced whole after every mail (writeAtomically). A crash between
// publishing a mail and saving this replays that one mail, which the core recognises by
// its event key. Before a mail is fetched and parsed its UID is noted as being handled
// (with how many times that began): a mail that ends the plugin's process (a crash, or a
// busy loop the host kills) is tried once more after the restart and then skipped, so one
// stranger's mail cannot end the plugin for good (watcher.ts). A listed sender's mail whose
// check could not be finished (a DNS lookup failed) is kept as deferred, with when to try
// it again, so that it is neither lost nor in the way of the mail after it.
import { join } from 'node:path';
import { readVersionedJson, versionedJsonText, writeAtomically } from '#sdk';

export interface FolderState {
  uidvalidity: string;
  last_uid: number;
  /** The mail being handled, and how many times its handling began: present only while it is. */
  handling?: { uid: number; tries: number };
  /** Mails to check again: since (ms) it was first deferred, tries so far, and when next (ms). */
  deferred?: Deferred[];
}

export interface Deferred {
  uid: number;
  since: number;
  tries: number;
  next: number;
}

/** Deferred mails kept per folder: past this, the oldest is given up (and said). */
export const MAX_DEFERRED = 100;

const FILE = 'sync.json';

export class SyncState {
  private readonly file: string;
  private folders = new Map<string, FolderState>();

  constructor(dir: string) {
    this.file = join(dir, FILE);
  }

  /** Reads the file; a corrupt one is moved aside (its new name returned) and every folder starts afresh. */
  load(): { movedAside?: string } {
    const saved = readVersionedJson(this.file, { migrations: [(json) => json], read: (json) => Object.entries((json as { folders?: Record<string, FolderState> }).folders ?? {}) });
    if (saved.kind === 'moved') return { movedAside: saved.movedAside };
    for (const [folder, s] of saved.kind === 'loaded' ? saved.value : []) {
      if (typeof s?.uidvalidity !== 'string' || !Number.isSafeInteger(s.last_uid) || s.last_uid < 0) continue;
      const h = s.handling;
      const handling = h && Number.isSafeInteger(h.uid) && Number.isSafeInteger(h.tries) ? { uid: h.uid, tries: h.tries } : undefined;
      const deferred = (Array.isArray(s.deferred) ? s.deferred : []).filter((d) => [d?.uid, d?.since, d?.tries, d?.next].every(Number.isSafeInteger)).slice(-MAX_DEFERRED);
      this.folders.set(folder, { uidvalidity: s.uidvalidity, last_uid: s.last_uid, ...(handling ? { handling } : {}), ...(deferred.length ? { deferred } : {}) });
    }
    return {};
  }

  get(folder: string): FolderState | undefined {
    return this.folders.get(folder);
  }

  /**
   * Notes that handling `uid` begins, saved before the mail is fetched; returns how many
   * times it began before (a process ended while handling it each time).
   */
  begin(folder: string, uid: number): number {
    const current = this.folders.get(folder);
    if (!current) return 0;
    const before = current.handling?.uid === uid ? current.handling.tries : 0;
    this.set(folder, { uidvalidity: current.uidvalidity, last_uid: current.last_uid, handling: { uid, tries: before + 1 } });
    return before;
  }

  /** The folder's deferred mails (oldest first). */
  deferred(folder: string): Deferred[] {
    return [...(this.folders.get(folder)?.deferred ?? [])];
  }

  /** Replaces the folder's deferred mails; returns those past MAX_DEFERRED, dropped (oldest). */
  setDeferred(folder: string, list: Deferred[]): Deferred[] {
    const current = this.folders.get(folder);
    if (!current) return [];
    const sorted = [...list].sort((a, b) => a.since - b.since);
    const dropped = sorted.slice(0, Math.max(0, sorted.length - MAX_DEFERRED));
    this.write(folder, { ...current, deferred: sorted.slice(dropped.length) });
    return dropped;
  }

  /** The folder's progress; its deferred mails are kept unless `state` says them (a new UIDVALIDITY: `[]`). */
  set(folder: string, state: FolderState): void {
    const deferred = state.deferred ?? this.folders.get(folder)?.deferred;
    this.write(folder, { uidvalidity: state.uidvalidity, last_uid: state.last_uid, ...(state.handling ? { handling: state.handling } : {}), ...(deferred?.length ? { deferred } : {}) });
  }

  private write(folder: string, state: FolderState): void {
    if (!state.deferred?.length) delete state.deferred;
    this.folders.set(folder, state);
    writeAtomically(this.file, versionedJsonText(1, { folders: Object.fromEntries(this.folders) }), 0o600);
  }
}
