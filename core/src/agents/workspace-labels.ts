// Files a session wrote after reading external content keep that label (DESIGN 16). The
// core cannot see which file a later agent reads, so the label is the group's workspace:
// once a session of the group was labelled, the group remembers since when (in the data
// folder, across restarts). Each new session of the group is then checked before its first
// turn: a file changed since then (by its ctime, which no process without root can set back)
// labels the session from its start; none left, and the group is clean again. The person
// can look at the files and say they are theirs (the console: "reviewed").
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeAtomically } from '../state/atomic-write.js';
import { readVersionedJson, versionedJsonText } from '../state/versioned-json.js';

/** Changed files listed for the console per group. */
export const MAX_LISTED_FILES = 50;

export interface WorkspaceLabel {
  /** When a session of the group first read external content (ISO 8601). */
  since: string;
  /** Files changed since then, as the last check found them (workspace-relative; at most MAX_LISTED_FILES). */
  files: string[];
  /** Changed files beyond those listed, or true when the check could not finish. */
  more: number | true;
  checked_at: string | null;
}

/** What looking at the workspace found: its changed files, or null when it could not look. */
export type ChangedFiles = { files: string[]; complete: boolean } | null;

type Labels = Record<string, WorkspaceLabel>;

/** Version 1 is the first: a file without a version is not one of ours (moved aside). */
const NONE_BEFORE = (): never => {
  throw new Error('no version: not a workspace-labels file');
};

function parse(json: unknown): Labels {
  const data = json as { version?: unknown; groups?: unknown } | null;
  if (!data || typeof data.groups !== 'object' || data.groups === null) throw new Error('not a workspace-labels file');
  const out: Labels = {};
  for (const [group, raw] of Object.entries(data.groups as Record<string, Partial<WorkspaceLabel>>)) {
    if (typeof raw?.since !== 'string' || !Number.isFinite(Date.parse(raw.since))) continue;
    const files = Array.isArray(raw.files) ? raw.files.filter((f): f is string => typeof f === 'string').slice(0, MAX_LISTED_FILES) : [];
    out[group] = { since: raw.since, files, more: raw.more === true || typeof raw.more === 'number' ? raw.more : 0, checked_at: typeof raw.checked_at === 'string' ? raw.checked_at : null };
  }
  return out;
}

export class WorkspaceLabels {
  private readonly labels: Labels;

  /** `file` null: in memory (tests). `onProblem` hears of a broken file moved aside (every group then counts as clean: said loudly by the caller). */
  constructor(
    private readonly file: string | null,
    onProblem: (problem: { movedAside: string; error: string }) => void = () => undefined,
  ) {
    const saved = file ? readVersionedJson(file, { migrations: [NONE_BEFORE], read: parse }) : ({ kind: 'missing' } as const);
    if (saved.kind === 'moved') onProblem(saved);
    this.labels = saved.kind === 'loaded' ? saved.value : {};
  }

  /** A session of `group` read external content: its workspace is labelled from now (or from earlier). */
  labelled(group: string, at = new Date()): void {
    if (this.labels[group]) return;
    this.labels[group] = { since: at.toISOString(), files: [], more: 0, checked_at: null };
    this.save();
  }

  since(group: string): string | null {
    return this.labels[group]?.since ?? null;
  }

  /**
   * What a new session's check found. True: the session is labelled (files changed since,
   * or the check could not tell). No changed file at all: the group is clean again.
   */
  checked(group: string, found: ChangedFiles): boolean {
    const label = this.labels[group];
    if (!label) return false;
    if (found && found.complete && found.files.length === 0) {
      delete this.labels[group];
      this.save();
      return false;
    }
    const files = found?.files ?? [];
    this.labels[group] = { ...label, files: files.slice(0, MAX_LISTED_FILES), more: found?.complete ? Math.max(0, files.length - MAX_LISTED_FILES) : true, checked_at: new Date().toISOString() };
    this.save();
    return true;
  }

  get(group: string): WorkspaceLabel | null {
    return this.labels[group] ?? null;
  }

  /** The person looked at the files and takes them as theirs: the group is clean. False: it was. */
  reviewed(group: string): boolean {
    if (!this.labels[group]) return false;
    delete this.labels[group];
    this.save();
    return true;
  }

  private save(): void {
    if (!this.file) return;
    mkdirSync(dirname(this.file), { recursive: true });
    writeAtomically(this.file, versionedJsonText(1, { groups: this.labels }, 1), 0o600);
  }
}

/** The `find` a new session's container runs (as the agent's user, before its first turn): files and links changed since `since`. */
export function changedFilesCommand(since: string): string[] {
  // One second earlier: ctimes compare at whole seconds here, and a file of that very second must count.
  const seconds = Math.floor(Date.parse(since) / 1000) - 1;
  return ['find', '/workspace/group', '-xdev', '-path', '/workspace/group/lost+found', '-prune', '-o', '(', '-type', 'f', '-o', '-type', 'l', ')', '-newerct', `@${seconds}`, '-printf', '%P\\0'];
}
