// Where each watched folder's sync stands: its UIDVALIDITY and the last UID handled, in the
// plugin's data folder, replaced whole after every mail (writeAtomically). A crash between
// publishing a mail and saving this replays that one mail, which the core recognises by
// its event key; a mail is never skipped.
import { join } from 'node:path';
import { readJsonState, writeAtomically } from '#sdk';

export interface FolderState {
  uidvalidity: string;
  last_uid: number;
}

const FILE = 'sync.json';

export class SyncState {
  private readonly file: string;
  private folders = new Map<string, FolderState>();

  constructor(dir: string) {
    this.file = join(dir, FILE);
  }

  /** Reads the file; a corrupt one is moved aside (its new name returned) and every folder starts afresh. */
  load(): { movedAside?: string } {
    const saved = readJsonState(this.file, (json) => Object.entries((json as { folders?: Record<string, FolderState> }).folders ?? {}));
    if (saved.kind === 'moved') return { movedAside: saved.movedAside };
    for (const [folder, s] of saved.kind === 'loaded' ? saved.value : []) {
      if (typeof s?.uidvalidity === 'string' && Number.isSafeInteger(s.last_uid) && s.last_uid >= 0) this.folders.set(folder, { uidvalidity: s.uidvalidity, last_uid: s.last_uid });
    }
    return {};
  }

  get(folder: string): FolderState | undefined {
    return this.folders.get(folder);
  }

  set(folder: string, state: FolderState): void {
    this.folders.set(folder, state);
    writeAtomically(this.file, JSON.stringify({ folders: Object.fromEntries(this.folders) }), 0o600);
  }
}
