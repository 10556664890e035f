// Files the core took from agents' workspaces for a person (a chart, a report): kept in
// the core's data folder, never in a plugin's, served by the console to a logged-in
// person. Bounded in count and bytes: when full, the group that holds the most gives up
// its oldest file, so that an agent that floods the store pushes out its own group's files
// and not another's. Each file is written whole or not at all, with its description beside it.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeAtomically } from '../state/atomic-write.js';
import { formatVersion, versionedJsonText } from '../state/versioned-json.js';
import type { FileKind } from './file-type.js';

/** What a handler gets instead of the path the agent gave, and what a page shows. */
export interface FileRef {
  id: string;
  name: string;
  size: number;
  type: string;
  inline: boolean;
}

interface Stored extends FileRef {
  group: string;
  created: string;
}

export interface FileStoreLimits {
  maxFiles: number;
  maxBytes: number;
}

export const FILE_STORE_LIMITS: FileStoreLimits = { maxFiles: 500, maxBytes: 512 * 1024 * 1024 };
/** The metadata file's format version. */
const FORMAT = 1;
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class FileStore {
  /** Oldest first. */
  private readonly files: Stored[] = [];
  private bytes = 0;

  constructor(
    private readonly dir: string,
    private readonly limits: FileStoreLimits = FILE_STORE_LIMITS,
  ) {
    // Only the store's own folder is private: a recursive mkdir would give its parents (the
    // data folder, which plugins' folders sit under) the same mode.
    mkdirSync(dirname(dir), { recursive: true });
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const found: Stored[] = [];
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      try {
        const json = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Stored & { version?: number };
        // Version 1 added the field alone; a newer file is a newer Carapace's: left untouched, not served.
        if (formatVersion(json) > FORMAT) continue;
        const stored = json;
        if (ID.test(stored.id) && existsSync(join(dir, stored.id))) found.push(stored);
        else rmSync(join(dir, name), { force: true });
      } catch {
        rmSync(join(dir, name), { force: true });
      }
    }
    for (const stored of found.sort((a, b) => a.created.localeCompare(b.created))) this.add(stored);
  }

  /** Keeps `bytes` as a file of `group`; throws when it cannot be written (a full disk). */
  put(group: string, name: string, bytes: Buffer, kind: FileKind): FileRef {
    const stored: Stored = { id: randomUUID(), name, size: bytes.length, type: kind.type, inline: kind.inline, group, created: new Date().toISOString() };
    writeAtomically(join(this.dir, stored.id), bytes);
    try {
      writeAtomically(join(this.dir, `${stored.id}.json`), versionedJsonText(FORMAT, { ...stored }));
    } catch (err) {
      rmSync(join(this.dir, stored.id), { force: true });
      throw err;
    }
    this.add(stored);
    const { id, size, type, inline } = stored;
    return { id, name, size, type, inline };
  }

  /** A kept file and where its bytes are; null for an id it does not have. */
  get(id: string): { ref: FileRef; group: string; path: string } | null {
    const stored = ID.test(id) ? this.files.find((f) => f.id === id) : undefined;
    if (!stored) return null;
    const { name, size, type, inline, group } = stored;
    return { ref: { id, name, size, type, inline }, group, path: join(this.dir, id) };
  }

  /** A kept file's name, type and bytes (a plugin's readFile); null for an id it does not have, or one gone from the disk. */
  read(id: string): { name: string; type: string; bytes: Buffer } | null {
    const kept = this.get(id);
    if (!kept) return null;
    try {
      return { name: kept.ref.name, type: kept.ref.type, bytes: readFileSync(kept.path) };
    } catch {
      return null;
    }
  }

  /** Forgets a kept file nobody will need (a proposal that wrote nothing); nothing for an id it does not have. */
  remove(id: string): void {
    const at = this.files.findIndex((f) => f.id === id);
    if (at >= 0) this.drop(at);
  }

  private add(stored: Stored): void {
    this.files.push(stored);
    this.bytes += stored.size;
    for (;;) {
      const byCount = this.files.length > this.limits.maxFiles;
      if (!byCount && this.bytes <= this.limits.maxBytes) return;
      const at = this.oldestOfLargestHolder(byCount);
      if (at < 0) return;
      this.drop(at);
    }
  }

  /** The oldest file of the group that holds the most files (`byCount`) or bytes, the newest file never; -1 when there is only that. */
  private oldestOfLargestHolder(byCount: boolean): number {
    const held = new Map<string, number>();
    for (const f of this.files) held.set(f.group, (held.get(f.group) ?? 0) + (byCount ? 1 : f.size));
    const candidates = this.files.slice(0, -1);
    let largest: string | null = null;
    for (const f of candidates) if (largest === null || held.get(f.group)! > held.get(largest)!) largest = f.group;
    return largest === null ? -1 : candidates.findIndex((f) => f.group === largest);
  }

  private drop(at: number): void {
    const [gone] = this.files.splice(at, 1);
    this.bytes -= gone.size;
    rmSync(join(this.dir, gone.id), { force: true });
    rmSync(join(this.dir, `${gone.id}.json`), { force: true });
  }
}
