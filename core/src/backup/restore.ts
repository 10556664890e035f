// Restoring an archive into an installation's folders. In this order, and nothing written to
// the target before the last check passed:
//   1. the installation must not be running (a live core's socket answers: RESTORE_RUNNING,
//      never overridden), and its folders must be empty unless forced (RESTORE_NOT_EMPTY);
//   2. the whole archive is verified in a staging folder elsewhere (verify.ts);
//   3. with force, what the folders held is removed; the archive's files are moved in with
//      their modes, and given the owners the appliance runs them as (when run as root): the
//      core's uid for config/, data/ and logs/, each plugin's own uid (data/plugins/.uids.json)
//      for its folder, root for data/plugins itself, the agents' uid for workspaces.
// A workspace comes back as a folder groups/<group>/: the next attach seeds a new image
// from it (storage.ts), at the quota configured then.
import { chmodSync, chownSync, copyFileSync, existsSync, lchownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import semver from 'semver';
import { APP_VERSION } from '../version.js';
import type { VolumePaths } from './collect.js';
import { asResult, fail, type Result } from './errors.js';
import type { Manifest } from './manifest.js';
import { verifyArchive } from './verify.js';

export interface RestoreOptions {
  archive: string;
  volumes: VolumePaths;
  passphrase?: string;
  /** Replace what the folders hold (never a running installation). */
  force: boolean;
  /** The run folder whose sockets a live core answers on. */
  runDir?: string;
  /** Where the archive is verified (default: the system's temp folder). */
  stagingDir?: string;
  /** Where an archived .env goes (the project's .env); left out without it. */
  envFile?: string;
  /** Who gets a restored .env (the person who ran `make restore`). */
  envOwner?: { uid: number; gid: number };
  /** The core's and the agents' uid (1000 in the images); owners are set only when run as root. */
  coreUid?: number;
  agentUid?: number;
}

export interface Restored {
  manifest: Manifest;
  files: number;
  databases: { path: string; userVersion: number }[];
  /** Lines the person should read (a newer archive, where .env went). */
  notes: string[];
}

/** Files an empty installation has from the repository. */
const SHIPPED = new Set(['.gitkeep', 'carapace.example.json', 'lost+found']);
const AREA_OF = (volumes: VolumePaths): Record<string, string> => ({ config: volumes.config, data: volumes.data, logs: volumes.logs, groups: volumes.groups });

/** Whether a core answers on the run folder's plugin socket (a stale socket file refuses). */
export function coreAnswers(runDir: string): Promise<boolean> {
  const socket = join(runDir, 'plugins.sock');
  if (!existsSync(socket)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const probe = connect(socket);
    const timer = setTimeout(() => finish(true), 2000); // it exists and hangs: treat as alive
    function finish(alive: boolean): void {
      clearTimeout(timer);
      probe.destroy();
      resolve(alive);
    }
    probe.once('connect', () => finish(true));
    probe.once('error', () => finish(false));
  });
}

function contents(volumes: VolumePaths): string[] {
  const found: string[] = [];
  for (const [area, dir] of Object.entries(AREA_OF(volumes))) {
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) if (!SHIPPED.has(name)) found.push(`${area}/${name}`);
  }
  return found;
}

function move(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
  try {
    renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    copyFileSync(from, to); // another mount (the folders are separate volumes in a container)
    rmSync(from);
  }
}

function chownTree(path: string, uid: number, gid: number): void {
  lchownSync(path, uid, gid);
  if (!statSync(path).isDirectory()) return;
  for (const name of readdirSync(path)) chownTree(join(path, name), uid, gid);
}

/**
 * Each plugin's uid from the plugin host's .uids.json (plugin-host/isolation.ts): `{version,
 * uids}`, or the bare map of the time before format versions. None yet: the plugin host
 * gives each plugin its uid (and its folder) when it starts it.
 */
function pluginUids(file: string): Record<string, number> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
  const versioned = json as { version?: unknown; uids?: unknown } | null;
  const map = versioned && typeof versioned.version === 'number' && versioned.uids && typeof versioned.uids === 'object' ? versioned.uids : json;
  if (!map || typeof map !== 'object') return {};
  return Object.fromEntries(Object.entries(map as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isSafeInteger(e[1]) && e[1] >= 1000));
}

/** Owners as the appliance runs them (see the top of this file). */
function fixOwners(volumes: VolumePaths, coreUid: number, agentUid: number): void {
  for (const dir of [volumes.config, volumes.logs, volumes.groups]) if (existsSync(dir)) chownTree(dir, dir === volumes.groups ? agentUid : coreUid, dir === volumes.groups ? agentUid : coreUid);
  if (!existsSync(volumes.data)) return;
  lchownSync(volumes.data, coreUid, coreUid);
  for (const name of readdirSync(volumes.data)) if (name !== 'plugins') chownTree(join(volumes.data, name), coreUid, coreUid);
  const plugins = join(volumes.data, 'plugins');
  if (!existsSync(plugins)) return;
  chownTree(plugins, 0, 0);
  chmodSync(plugins, 0o711);
  for (const [plugin, uid] of Object.entries(pluginUids(join(plugins, '.uids.json')))) {
    const dir = join(plugins, plugin);
    if (!existsSync(dir)) continue;
    chownTree(dir, uid, uid);
    chmodSync(dir, 0o700);
  }
}

function placeEnv(options: RestoreOptions, staging: string, notes: string[]): void {
  const from = join(staging, 'secrets', '.env');
  if (!existsSync(from)) return;
  if (!options.envFile) {
    notes.push('the archive holds a .env; it was not restored (no place given for it)');
    return;
  }
  let target = options.envFile;
  if (existsSync(target)) {
    if (options.force) renameSync(target, `${target}.pre-restore`);
    else target = `${target}.restored`;
  }
  copyFileSync(from, target);
  chmodSync(target, 0o600);
  if (options.envOwner && process.getuid?.() === 0) chownSync(target, options.envOwner.uid, options.envOwner.gid);
  notes.push(target === options.envFile ? `.env restored to ${target}${options.force ? ' (the one before kept as .env.pre-restore)' : ''}` : `a .env exists: the archive's is at ${target}; compare the two and keep one`);
}

async function restore(options: RestoreOptions): Promise<Restored> {
  if (!existsSync(options.archive)) fail('BACKUP_NOT_FOUND', `${options.archive} does not exist`, 'give the path of an archive made by `make backup` (ARCHIVE=backups/carapace-….tar.gz)');
  if (options.runDir && (await coreAnswers(options.runDir))) {
    fail('RESTORE_RUNNING', `the installation is running (a core answers on ${join(options.runDir, 'plugins.sock')}); a running installation is never overwritten`, 'stop it first (`make down`), then restore');
  }
  const present = contents(options.volumes);
  if (present.length > 0 && !options.force) {
    fail('RESTORE_NOT_EMPTY', `the installation's folders are not empty (${present.slice(0, 4).join(', ')}${present.length > 4 ? ', …' : ''})`, 'restore into an empty volumes folder, or add FORCE=1 to replace what is there (it is removed)');
  }
  const staging = mkdtempSync(join(options.stagingDir ?? tmpdir(), 'carapace-restore-'));
  try {
    const verified = await verifyArchive(options.archive, staging, options.passphrase);
    const notes: string[] = [];
    if (semver.valid(verified.manifest.carapace_version) && semver.gt(verified.manifest.carapace_version, APP_VERSION)) {
      notes.push(`made by Carapace ${verified.manifest.carapace_version}, newer than this ${APP_VERSION}: a database in a format newer than this code knows is refused when it is opened (STORE_TOO_NEW), not read half; run ${verified.manifest.carapace_version} or newer`);
    }
    const areas = AREA_OF(options.volumes);
    if (options.force) {
      for (const dir of Object.values(areas)) {
        if (!existsSync(dir)) continue;
        for (const name of readdirSync(dir)) if (!SHIPPED.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
      }
    }
    for (const dir of Object.values(areas)) mkdirSync(dir, { recursive: true });
    try {
      for (const file of verified.manifest.files) {
        const [area, ...rest] = file.path.split('/');
        if (area === 'secrets') continue;
        const target = join(areas[area], ...rest);
        move(join(staging, file.path), target);
        chmodSync(target, file.mode);
      }
      placeEnv(options, staging, notes);
      if (process.getuid?.() === 0) fixOwners(options.volumes, options.coreUid ?? 1000, options.agentUid ?? 1000);
    } catch (err) {
      fail('RESTORE_FAILED', `writing the verified archive into the installation failed part way: ${(err as Error).message}`, 'free space or fix permissions, then restore again with FORCE=1 (the archive itself is sound)');
    }
    return { manifest: verified.manifest, files: verified.manifest.files.length, databases: verified.databases, notes };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

export function restoreBackup(options: RestoreOptions): Promise<Result<Restored>> {
  return asResult(
    () => restore(options),
    (message) => ({ code: 'RESTORE_FAILED', message: `the restore failed: ${message}`, fix: 'see the message; the installation\'s folders were not changed unless the archive had been verified' }),
  );
}
