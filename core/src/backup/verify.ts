// An archive checked whole before anything is restored from it: extracted into a staging
// folder against its manifest (archive.ts: every file listed, none extra, sizes and
// checksums), then every database in it opened and put through `PRAGMA integrity_check`,
// its schema version compared with the manifest's.
import { join } from 'node:path';
import { extractArchive, type Extracted } from './archive.js';
import { DAMAGED_FIX, fail } from './errors.js';
import { checkDatabase } from './sqlite-copy.js';

export interface Verified extends Extracted {
  /** Each database and its schema version (PRAGMA user_version). */
  databases: { path: string; userVersion: number }[];
}

export async function verifyArchive(archive: string, staging: string, passphrase: string | undefined): Promise<Verified> {
  const extracted = await extractArchive(archive, staging, passphrase);
  const databases: Verified['databases'] = [];
  for (const file of extracted.manifest.files) {
    if (!file.sqlite) continue;
    let checked: { problem: string | null; userVersion: number };
    try {
      checked = checkDatabase(join(staging, file.path));
    } catch (err) {
      checked = { problem: (err as Error).message, userVersion: -1 };
    }
    if (checked.problem !== null) fail('BACKUP_DAMAGED', `${file.path} in ${archive} fails integrity_check (${checked.problem})`, DAMAGED_FIX);
    if (checked.userVersion !== file.sqlite.user_version) {
      fail('BACKUP_DAMAGED', `${file.path} in ${archive} has schema version ${checked.userVersion}, its manifest says ${file.sqlite.user_version}`, DAMAGED_FIX);
    }
    databases.push({ path: file.path, userVersion: checked.userVersion });
  }
  return { ...extracted, databases };
}
