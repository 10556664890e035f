// Backups from the command line (`make backup`, `make restore` run this in a one-off
// container of the core's image, as root, so that it reads the plugins' 0700 folders):
//
//   node dist/core/src/backup/cli.js create [--volumes DIR] [--out DIR] [--host-dir DIR] [--owner UID:GID]
//                                           [--secrets] [--dotenv FILE] [--scheduled --keep N]
//   node dist/core/src/backup/cli.js restore ARCHIVE [--volumes DIR] [--force] [--run-dir DIR] [--staging DIR]
//                                           [--dotenv FILE] [--owner UID:GID]
//   node dist/core/src/backup/cli.js verify ARCHIVE [--staging DIR]
//
// Folders default to the core's (CARAPACE_CONFIG, CARAPACE_DATA_DIR, CARAPACE_LOG_DIR,
// CARAPACE_GROUPS_DIR); --volumes DIR means DIR/config, DIR/data, DIR/logs, DIR/groups.
// CARAPACE_BACKUP_PASSPHRASE encrypts what `create` makes and opens what `restore` reads.
// `create` prints the archive's path as its last line. A failure is one line,
// "carapace: <CODE>: what happened; what to do", and exit status 1 (2: wrong usage).
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DockerRuntime } from '../agents/docker-runtime.js';
import { loadConfig } from '../config.js';
import { pathsFromEnv } from '../settings.js';
import type { VolumePaths } from './collect.js';
import { createBackup, type BackupMade } from './create.js';
import { MIN_PASSPHRASE } from './encryption.js';
import { problemLine, type BackupProblem } from './errors.js';
import { restoreBackup, type Restored } from './restore.js';
import { verifyArchive } from './verify.js';
import { dockerImageReader } from './workspaces.js';

const OPTIONS = {
  volumes: { type: 'string' },
  out: { type: 'string' },
  'host-dir': { type: 'string' },
  owner: { type: 'string' },
  secrets: { type: 'boolean', default: false },
  dotenv: { type: 'string' },
  scheduled: { type: 'boolean', default: false },
  keep: { type: 'string' },
  force: { type: 'boolean', default: false },
  'run-dir': { type: 'string' },
  staging: { type: 'string' },
} as const;

const usage = (message: string): BackupProblem => ({ code: 'BACKUP_USAGE', message, fix: 'see the top of core/src/backup/cli.ts (or README, Backups)' });

export function volumesFrom(dir: string | undefined): VolumePaths {
  if (dir) return { config: join(dir, 'config'), data: join(dir, 'data'), logs: join(dir, 'logs'), groups: join(dir, 'groups') };
  const paths = pathsFromEnv();
  return { config: dirname(paths.configFile), data: paths.dataDir, logs: paths.logDir, groups: paths.groupsDir };
}

function owner(text: string | undefined): { uid: number; gid: number } | undefined | BackupProblem {
  if (text === undefined || text === '') return undefined;
  const m = /^(\d+):(\d+)$/.exec(text);
  return m ? { uid: Number(m[1]), gid: Number(m[2]) } : usage(`--owner takes UID:GID, not "${text}"`);
}

function folderOwner(dir: string): { uid: number; gid: number } | undefined {
  try {
    const stat = statSync(dir);
    return { uid: stat.uid, gid: stat.gid };
  } catch {
    return undefined;
  }
}

const isProblem = (v: unknown): v is BackupProblem => typeof v === 'object' && v !== null && 'code' in v && 'fix' in v;

const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MB`;

function reportMade(made: BackupMade): void {
  console.log(`Backed up ${made.files} files (${mb(made.bytes)} archived${made.encrypted ? ', encrypted' : ''}) in ${(made.durationMs / 1000).toFixed(1)} s.`);
  for (const s of made.skipped) console.log(`Left out: ${s.path}: ${s.reason}`);
  for (const p of made.pruned) console.log(`Removed an older scheduled backup: ${p}`);
  console.log(made.path);
}

function reportRestored(restored: Restored, volumes: VolumePaths): void {
  const m = restored.manifest;
  console.log(`Verified: ${restored.files} files match the manifest; ${restored.databases.length} databases pass integrity_check.`);
  console.log(`Restored the backup of ${m.created_at} (Carapace ${m.carapace_version}) into ${dirname(volumes.data)}: configuration, ${restored.databases.length} databases, audit log, ${m.workspaces.length} workspace(s)${m.secrets ? ', secrets' : ''}.`);
  for (const d of restored.databases) console.log(`  ${d.path}: schema version ${d.userVersion}`);
  console.log('Each database keeps its schema version: a store that finds one newer than it knows refuses it (STORE_TOO_NEW) rather than read it; an older one is migrated once when opened.');
  for (const n of restored.notes) console.log(`Note: ${n}`);
  console.log('Workspaces come back as folders groups/<group>/: each becomes the group\'s disk image when its agent first starts. Start the appliance with `make up`.');
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  } catch (err) {
    return printed(usage((err as Error).message));
  }
  const { values, positionals } = parsed;
  const [command, archive] = positionals;
  const passphrase = process.env.CARAPACE_BACKUP_PASSPHRASE || undefined;
  const volumes = volumesFrom(values.volumes);
  const who = owner(values.owner);
  if (isProblem(who)) return printed(who);

  if (command === 'create' && positionals.length === 1) {
    if (passphrase && passphrase.length < MIN_PASSPHRASE) return printed(usage(`CARAPACE_BACKUP_PASSPHRASE is too short (at least ${MIN_PASSPHRASE} characters)`));
    const keep = values.keep === undefined ? undefined : Number(values.keep);
    if (keep !== undefined && !(Number.isSafeInteger(keep) && keep >= 1)) return printed(usage('--keep takes a number of archives, at least 1'));
    let helperImage = 'carapace-agent:latest';
    try {
      helperImage = loadConfig(join(volumes.config, 'carapace.json')).agents.image;
    } catch {
      // a broken carapace.json is backed up as it is; the default agent image reads images
    }
    const runtime = new DockerRuntime();
    const outDir = resolve(values.out ?? process.env.CARAPACE_BACKUP_DIR ?? 'backups');
    const result = await createBackup({
      volumes,
      outDir,
      hostDir: values['host-dir'],
      kind: values.scheduled ? 'scheduled' : 'manual',
      secrets: values.secrets,
      envFile: values.dotenv,
      passphrase,
      // Root (a container, a scheduled run): the archive is the backups folder's owner's.
      owner: who ?? (process.getuid?.() === 0 ? folderOwner(outDir) : undefined),
      images: dockerImageReader(runtime, { helperImage, instance: process.env.CARAPACE_INSTANCE || 'carapace' }),
      keep,
    });
    if (!result.ok) return printed(result.problem);
    reportMade(result.value);
    return 0;
  }
  if (command === 'restore' && archive && positionals.length === 2) {
    const result = await restoreBackup({
      archive: resolve(archive),
      volumes,
      passphrase,
      force: values.force,
      runDir: values['run-dir'] ?? pathsFromEnv().runDir,
      stagingDir: values.staging,
      envFile: values.dotenv,
      envOwner: who,
    });
    if (!result.ok) return printed(result.problem);
    reportRestored(result.value, volumes);
    return 0;
  }
  if (command === 'verify' && archive && positionals.length === 2) {
    const staging = mkdtempSync(join(values.staging ?? tmpdir(), 'carapace-verify-'));
    try {
      const verified = await verifyArchive(resolve(archive), staging, passphrase);
      console.log(`${archive}: sound. ${verified.manifest.files.length} files match the manifest; ${verified.databases.length} databases pass integrity_check (made ${verified.manifest.created_at} by Carapace ${verified.manifest.carapace_version}${verified.encrypted ? ', encrypted' : ''}).`);
      return 0;
    } catch (err) {
      const problem = (err as { problem?: BackupProblem }).problem;
      return printed(problem ?? { code: 'BACKUP_DAMAGED', message: (err as Error).message, fix: 'use another archive' });
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  return printed(usage('expected: create | restore ARCHIVE | verify ARCHIVE'));
}

function printed(problem: BackupProblem): number {
  process.stderr.write(`${problemLine(problem)}\n`);
  return problem.code === 'BACKUP_USAGE' ? 2 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`carapace: BACKUP_FAILED: ${(err as Error).message}; this is a bug, please report it\n`);
    process.exit(1);
  },
);
