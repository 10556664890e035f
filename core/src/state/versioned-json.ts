// A JSON state file with a format version: `{ "version": N, ... }`. A file without one
// (written before versions) is version 0. Older files are migrated step by step when read
// and written back at once in the new format; a newer file is refused whole
// (StoreTooNewError), never half-read nor moved aside.
import { writeAtomically } from './atomic-write.js';
import { reportMigration } from './format-migrations.js';
import { readJsonState, StoreTooNewError, type SavedState } from './json-state.js';

export interface JsonFormat<T> {
  /** migrations[i] takes the content from version i to i + 1; the version written is their count. */
  migrations: ReadonlyArray<(json: unknown) => unknown>;
  /** Reads the current version's content; throws on a shape it does not take (the file is then moved aside). */
  read: (json: unknown) => T;
}

/** The version a parsed file says it has (0: none). */
export function formatVersion(json: unknown): number {
  const version = json && typeof json === 'object' && !Array.isArray(json) ? (json as { version?: unknown }).version : undefined;
  return typeof version === 'number' && Number.isSafeInteger(version) && version >= 0 ? version : 0;
}

export function readVersionedJson<T>(file: string, format: JsonFormat<T>): SavedState<T> {
  const known = format.migrations.length;
  let migrated: { from: number; content: unknown } | null = null;
  const saved = readJsonState(file, (json) => {
    const found = formatVersion(json);
    if (found > known) throw new StoreTooNewError(file, found, known);
    let content = json;
    for (let version = found; version < known; version++) content = format.migrations[version]!(content);
    const value = format.read(content);
    if (found < known) migrated = { from: found, content };
    return value;
  });
  if (saved.kind === 'loaded' && migrated !== null) {
    const { from, content } = migrated as { from: number; content: unknown };
    // Written back now, in the new format: migrated once, whether or not the store saves soon.
    try {
      if (content && typeof content === 'object' && !Array.isArray(content)) writeAtomically(file, versionedJsonText(known, content as Record<string, unknown>), 0o600);
    } catch {
      // a read-only or full disk: read again (and said again) next time
    }
    reportMigration({ file, from, to: known });
  }
  return saved;
}

/** The text a store writes: its content with the version first. */
export function versionedJsonText(version: number, content: Record<string, unknown>, indent?: number): string {
  return JSON.stringify({ version, ...content }, null, indent);
}
