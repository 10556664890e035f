// The last backup's outcome, in data/backup-status.json: written by every backup (`make
// backup`, a scheduled one, in a container or in the core), read by the core for the
// Overview, the Checks page and Activity. Each outcome has an id, so that the core audits
// each once, whoever made it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeAtomically } from '../state/atomic-write.js';
import type { BackupCode } from './errors.js';

export const STATUS_FILE = 'backup-status.json';

export interface BackupOutcome {
  id: string;
  at: string;
  kind: 'manual' | 'scheduled';
  ok: boolean;
  /** Made: where (as the person's machine names it, when known), how big, how many files, how long. */
  path?: string;
  bytes?: number;
  files?: number;
  duration_ms?: number;
  encrypted?: boolean;
  /** Files found and left out (a damaged database). */
  skipped?: number;
  /** Failed: why. */
  code?: BackupCode;
  message?: string;
}

export interface BackupStatus {
  last: BackupOutcome | null;
  /** When the last backup that worked was made. */
  last_ok_at: string | null;
}

export function statusFile(dataDir: string): string {
  return join(dataDir, STATUS_FILE);
}

export function readStatus(dataDir: string): BackupStatus {
  try {
    const raw = JSON.parse(readFileSync(statusFile(dataDir), 'utf8')) as Partial<BackupStatus>;
    const last = raw.last && typeof raw.last.id === 'string' && typeof raw.last.at === 'string' && typeof raw.last.ok === 'boolean' ? raw.last : null;
    return { last, last_ok_at: typeof raw.last_ok_at === 'string' ? raw.last_ok_at : null };
  } catch {
    return { last: null, last_ok_at: null };
  }
}

/** Records an outcome; a status that cannot be written is not a failed backup (the caller logs it). */
export function recordOutcome(dataDir: string, outcome: BackupOutcome): void {
  const before = readStatus(dataDir);
  const status: BackupStatus = { last: outcome, last_ok_at: outcome.ok ? outcome.at : before.last_ok_at };
  writeAtomically(statusFile(dataDir), `${JSON.stringify(status, null, 2)}\n`, 0o644);
}
