// What can go wrong with a backup or a restore, as values: a code, what happened, and what
// the person can do about it. The CLI prints one line from it and exits non-zero; the core
// audits it and shows it on the Overview and the Checks page.

export type BackupCode =
  /** The archive is not what its manifest says (a checksum, a missing or extra file, a database that fails integrity_check, a truncated or altered file). */
  | 'BACKUP_DAMAGED'
  /** An encrypted archive, and the passphrase given does not open it. */
  | 'BACKUP_WRONG_PASSPHRASE'
  /** An encrypted archive, and no passphrase was given. */
  | 'BACKUP_PASSPHRASE_NEEDED'
  /** An archive in a format this Carapace does not know (made by a newer one). */
  | 'BACKUP_UNSUPPORTED'
  | 'BACKUP_NOT_FOUND'
  /** A workspace held as an ext4 image could not be read (no Docker engine, a helper that failed). */
  | 'BACKUP_WORKSPACE_UNREADABLE'
  /** Anything else while making the archive (a full disk, a file that cannot be read). */
  | 'BACKUP_FAILED'
  /** The target holds an installation already: not overwritten without force. */
  | 'RESTORE_NOT_EMPTY'
  /** The installation at the target is running: never overwritten. */
  | 'RESTORE_RUNNING'
  /** Writing the verified archive into the target failed part way. */
  | 'RESTORE_FAILED'
  | 'BACKUP_USAGE';

export interface BackupProblem {
  code: BackupCode;
  message: string;
  /** What to do about it, in a person's words. */
  fix: string;
}

export type Result<T> = { ok: true; value: T } | { ok: false; problem: BackupProblem };

/** Thrown inside the backup modules; the public functions turn it into a Result. */
export class BackupFailure extends Error {
  constructor(readonly problem: BackupProblem) {
    super(`${problem.code}: ${problem.message}`);
    this.name = 'BackupFailure';
  }
}

export function fail(code: BackupCode, message: string, fix: string): never {
  throw new BackupFailure({ code, message, fix });
}

export const DAMAGED_FIX = 'use another archive (an older one, or the copy you synced elsewhere); this one cannot be restored';

/** Runs `work`; a BackupFailure becomes its problem, any other error `otherwise` with its message. */
export async function asResult<T>(work: () => Promise<T>, otherwise: (message: string) => BackupProblem): Promise<Result<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (err) {
    if (err instanceof BackupFailure) return { ok: false, problem: err.problem };
    return { ok: false, problem: otherwise((err as Error).message) };
  }
}

/** The one line a person reads. */
export function problemLine(problem: BackupProblem): string {
  return `carapace: ${problem.code}: ${problem.message}; ${problem.fix}`;
}
