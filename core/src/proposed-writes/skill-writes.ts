// The person's skills folder, as propose_write sees it: what a proposed change would
// replace (the lines a person reads beside the change, bound into the hash of their
// answer: confirm/call-state.ts), and the change applied after their yes. Only the core
// writes here; sandboxes and agents mount skills read-only, if at all.
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CallState } from '../confirm/call-state.js';
import { ToolFailure } from '../protocol/errors.js';
import { writeAtomically } from '../state/atomic-write.js';
import type { ProposedChange } from './proposed-change.js';

export interface AppliedChange {
  skill: string;
  created: boolean;
  written: { path: string; bytes: number; sha256: string }[];
}

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

export class SkillWrites {
  constructor(private readonly dir: string) {}

  /** What the change would do to the folder as it is now: one line for the skill, one for each file. */
  state(change: ProposedChange): CallState {
    const problem = this.obstacle(change);
    if (problem) return { unavailable: `nothing can be written: ${problem}` };
    const folder = join(this.dir, change.skill);
    const exists = lstatSync(folder, { throwIfNoEntry: false });
    const lines = [exists ? `skill "${change.skill}" exists (${this.count(folder)} files); this changes it` : `skill "${change.skill}" does not exist yet; this creates it`];
    for (const file of change.files) {
      const target = join(folder, file.path);
      const now = lstatSync(target, { throwIfNoEntry: false }) ? readFileSync(target) : undefined;
      const bytes = Buffer.byteLength(file.content);
      lines.push(now === undefined ? `${file.path}: new file, ${bytes} bytes` : sha256(now) === sha256(file.content) ? `${file.path}: unchanged` : `${file.path}: replaces the current ${now.length} bytes (sha256 ${sha256(now).slice(0, 12)}) with ${bytes} bytes`);
    }
    return { lines };
  }

  /** Writes the change (each file atomically); a link or a non-folder on the way refuses it whole, before anything is written. */
  apply(change: ProposedChange): AppliedChange | ToolFailure {
    const problem = this.obstacle(change);
    if (problem) return new ToolFailure({ code: 'WRITE_REFUSED', message: `nothing was written: ${problem}`, retriable: false, stage: 6 });
    const folder = join(this.dir, change.skill);
    const created = !lstatSync(folder, { throwIfNoEntry: false });
    const written: AppliedChange['written'] = [];
    for (const file of change.files) {
      const path = join(folder, file.path);
      mkdirSync(dirname(path), { recursive: true });
      writeAtomically(path, file.content);
      written.push({ path: file.path, bytes: Buffer.byteLength(file.content), sha256: sha256(file.content) });
    }
    return { skill: change.skill, created, written };
  }

  /** A link, or a file where a folder goes (or the reverse), anywhere from the skills folder to each file. */
  private obstacle(change: ProposedChange): string | null {
    for (const file of change.files) {
      const parts = [change.skill, ...file.path.split('/')];
      const dirs = [this.dir, ...parts.slice(0, -1).map((_, i) => join(this.dir, ...parts.slice(0, i + 1)))];
      const problem = dirs.map((d) => refusal(d, 'dir')).find((p) => p !== null) ?? refusal(join(this.dir, ...parts), 'file');
      if (problem) return problem.replace(this.dir, 'skills');
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
