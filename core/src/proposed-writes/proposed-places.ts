// The places propose_write writes to, as it sees them: the person's skills folder and their
// documents folder. What a proposed change would replace (the lines a person reads beside
// the change, bound into the hash of their answer: confirm/call-state.ts), and the change
// applied after their yes. Only the core writes here; sandboxes and agents mount skills
// read-only, if at all, and never see documents.
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CallState } from '../confirm/call-state.js';
import { ToolFailure } from '../protocol/errors.js';
import { writeAtomically } from '../state/atomic-write.js';
import type { ProposedChange, ProposedFile } from './proposed-change.js';

export interface AppliedChange {
  /** The folder written: "skills/<name>" or "documents". */
  folder: string;
  created: boolean;
  /** Paths inside that folder. */
  written: { path: string; bytes: number; sha256: string }[];
}

/** Where each place is; a place without a folder takes no proposals. */
export interface PlaceDirs {
  skills?: string;
  documents?: string;
}

/** A file this large already there is told by its size and time, not read to be hashed. */
const HASHED_UP_TO = 1024 * 1024;

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A path that exists and is not what it should be (a link, a file where a folder goes): never written through. */
function refusal(path: string, want: 'dir' | 'file'): string | null {
  const stat = lstatSync(path, { throwIfNoEntry: false });
  if (!stat) return null;
  if (stat.isSymbolicLink()) return `${path} is a symbolic link`;
  if (want === 'dir' ? !stat.isDirectory() : !stat.isFile()) return `${path} is not a ${want === 'dir' ? 'folder' : 'regular file'}`;
  return null;
}

/** What a proposed file would do to the one there now. */
function fileLine(target: string, file: ProposedFile): string {
  const bytes = 'taken' in file ? file.taken.size : Buffer.byteLength(file.content);
  const hash = 'taken' in file ? file.taken.sha256 : sha256(file.content);
  // A file from the workspace is told by its kind and hash: the person sees it on the Approvals page.
  const what = 'taken' in file ? `${bytes} bytes (${file.taken.type} from the workspace, sha256 ${hash.slice(0, 12)})` : `${bytes} bytes`;
  const stat = lstatSync(target, { throwIfNoEntry: false });
  if (!stat) return `${file.path}: new file, ${what}`;
  if (stat.size > HASHED_UP_TO) return `${file.path}: replaces the current ${stat.size} bytes (last changed ${stat.mtime.toISOString()}) with ${what}`;
  const now = readFileSync(target);
  if (sha256(now) === hash) return `${file.path}: unchanged`;
  return `${file.path}: replaces the current ${now.length} bytes (sha256 ${sha256(now).slice(0, 12)}) with ${what}`;
}

/** The bytes a proposed file writes, or why they cannot be had: a taken file's kept copy must still be what the person saw. */
function bytesOf(file: ProposedFile, kept: (id: string) => Buffer | null): Buffer | string {
  if (!('taken' in file)) return Buffer.from(file.content);
  const bytes = kept(file.taken.id);
  if (!bytes) return `the kept copy of ${file.path} is gone (the core keeps a bounded number of files): propose it again`;
  return sha256(bytes) === file.taken.sha256 ? bytes : `the kept copy of ${file.path} is not what the person saw`;
}

export class ProposedPlaces {
  constructor(private readonly dirs: PlaceDirs) {}

  /** The place's folder on disk and how the person knows it, or null where this core has none. */
  private where(change: ProposedChange): { root: string; folder: string; shown: string } | null {
    const root = this.dirs[change.place];
    if (!root) return null;
    return change.place === 'skills' ? { root, folder: join(root, change.skill), shown: `skills/${change.skill}` } : { root, folder: root, shown: 'documents' };
  }

  /** What the change would do to the place as it is now: one line for the folder, one for each file. */
  state(change: ProposedChange): CallState {
    const where = this.where(change);
    if (!where) return { unavailable: `this installation has no ${change.place} folder` };
    const problem = this.obstacle(change.place, where.root, where.folder, change.files);
    if (problem) return { unavailable: `nothing can be written: ${problem}` };
    const exists = lstatSync(where.folder, { throwIfNoEntry: false });
    const heading =
      change.place === 'skills'
        ? exists ? `skill "${change.skill}" exists (${this.count(where.folder)} files); this changes it` : `skill "${change.skill}" does not exist yet; this creates it`
        : `into your documents folder (${change.files.length} ${change.files.length === 1 ? 'file' : 'files'})`;
    return { lines: [heading, ...change.files.map((f) => fileLine(join(where.folder, f.path), f))] };
  }

  /** Writes the change (each file atomically); a link or a non-folder on the way, or a kept copy gone, refuses it whole, before anything is written. */
  apply(change: ProposedChange, kept: (id: string) => Buffer | null = () => null): AppliedChange | ToolFailure {
    const where = this.where(change);
    if (!where) return new ToolFailure({ code: 'WRITES_UNAVAILABLE', message: `this installation takes no proposed writes to ${change.place} (it has no ${change.place} folder)`, retriable: false, stage: 6 });
    const problem = this.obstacle(change.place, where.root, where.folder, change.files);
    if (problem) return new ToolFailure({ code: 'WRITE_REFUSED', message: `nothing was written: ${problem}`, retriable: false, stage: 6 });
    const contents = change.files.map((f) => bytesOf(f, kept));
    const missing = contents.find((c): c is string => typeof c === 'string');
    if (missing) return new ToolFailure({ code: 'WRITE_REFUSED', message: `nothing was written: ${missing}`, retriable: false, stage: 6 });
    const created = !lstatSync(where.folder, { throwIfNoEntry: false });
    const written: AppliedChange['written'] = [];
    change.files.forEach((file, i) => {
      const path = join(where.folder, file.path);
      const bytes = contents[i] as Buffer;
      mkdirSync(dirname(path), { recursive: true });
      writeAtomically(path, bytes);
      written.push({ path: file.path, bytes: bytes.length, sha256: sha256(bytes) });
    });
    return { folder: where.shown, created, written };
  }

  /** A link, or a file where a folder goes (or the reverse), anywhere from the place's folder to each file. */
  private obstacle(place: ProposedChange['place'], root: string, folder: string, files: ProposedFile[]): string | null {
    for (const file of files) {
      const parts = [...folder.slice(root.length).split('/').filter(Boolean), ...file.path.split('/')];
      const dirs = [root, ...parts.slice(0, -1).map((_, i) => join(root, ...parts.slice(0, i + 1)))];
      const problem = dirs.map((d) => refusal(d, 'dir')).find((p) => p !== null) ?? refusal(join(root, ...parts), 'file');
      if (problem) return problem.replace(root, place);
    }
    return null;
  }

  private count(folder: string): number {
    try {
      return readdirSync(folder, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length;
    } catch {
      return 0;
    }
  }
}
