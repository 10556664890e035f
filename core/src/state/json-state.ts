// A JSON state file as an earlier run left it. Missing: a first run. Not JSON, or not the
// shape its owner reads (a crash of an older version mid-write, a disk fault, a hand
// edit): moved aside, kept for a person to look at and said, never silently replaced.
import { existsSync, readFileSync, renameSync } from 'node:fs';

/** A file a newer Carapace wrote: refused whole, never moved aside nor half-read. */
export class StoreTooNewError extends Error {
  readonly code = 'STORE_TOO_NEW';
  constructor(file: string | null, found: number, known: number) {
    super(`${file ?? 'database'} has format version ${found}, newer than the ${known} this Carapace knows: run the newer version, or restore a backup`);
    this.name = 'StoreTooNewError';
  }
}

export type SavedState<T> = { kind: 'missing' } | { kind: 'loaded'; value: T } | { kind: 'moved'; movedAside: string; error: string };

/** The name a broken state file is kept under: `<file>.corrupt-<time>`, sortable; never one already there (two in one millisecond). */
export function asideName(file: string): string {
  const base = `${file}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  let name = base;
  for (let n = 2; existsSync(name); n++) name = `${base}-${n}`;
  return name;
}

/** Reads `file` with `read`, which throws on a shape it does not take. Other I/O errors, and StoreTooNewError, are thrown. */
export function readJsonState<T>(file: string, read: (json: unknown) => T): SavedState<T> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    throw err;
  }
  try {
    return { kind: 'loaded', value: read(JSON.parse(text) as unknown) };
  } catch (err) {
    if (err instanceof StoreTooNewError) throw err;
    const movedAside = asideName(file);
    renameSync(file, movedAside);
    return { kind: 'moved', movedAside, error: (err as Error).message };
  }
}
