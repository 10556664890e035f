// Every stored file carries a format version (DESIGN 18); older files are migrated once, and
// a person sees that in Activity. Stores say so here as they open, wherever they are (some
// open before the audit log exists, plugins' stores in processes far from it); the core, or
// a plugin's runner, takes what was said and tells Activity.
export interface FormatMigration {
  /** The file, as its store names it. */
  file: string;
  from: number;
  to: number;
}

type Listener = (migration: FormatMigration) => void;

const MAX_PENDING = 100;
const pending: FormatMigration[] = [];
let listener: Listener | null = null;

/** A store migrated `file`: told now, or kept (bounded) until someone listens. */
export function reportMigration(migration: FormatMigration): void {
  if (listener) listener(migration);
  else if (pending.length < MAX_PENDING) pending.push(migration);
}

/** The one listener of this process; it hears what was reported before it too. */
export function onMigration(next: Listener): void {
  listener = next;
  for (const migration of pending.splice(0)) next(migration);
}

/** What Activity says of one. */
export function migrationText(m: FormatMigration): string {
  return `${m.file} migrated from format version ${m.from} to ${m.to} (once; the file is now written in the new format)`;
}
