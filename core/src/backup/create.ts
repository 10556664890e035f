// Making a backup: everything collect.ts finds, copied into a staging folder beside the
// archives (databases through SQLite's backup API, the rest as files, workspaces as
// folders), described by a manifest, packed (archive.ts), handed to its owner, and the
// outcome recorded (status.ts). Safe while the appliance runs: nothing is written where it
// is read from.
import { randomUUID } from 'node:crypto';
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { APP_VERSION } from '../version.js';
import { writeArchive } from './archive.js';
import { collect, mode, walkFiles, type VolumePaths } from './collect.js';
import { asResult, fail, type Result } from './errors.js';
import { FORMAT_VERSION, hashFile, MANIFEST, type Manifest, type ManifestFile, type Skipped } from './manifest.js';
import { copyDatabase, DamagedDatabase } from './sqlite-copy.js';
import { recordOutcome, type BackupOutcome } from './status.js';
import { copyFolder, type ImageReader } from './workspaces.js';

export interface CreateOptions {
  volumes: VolumePaths;
  /** Where archives go, as this process sees it. */
  outDir: string;
  /** The same folder as the person's machine names it (the Makefile's), for what is printed and recorded. */
  hostDir?: string;
  kind: 'manual' | 'scheduled';
  /** .env (at `envFile`) and the admin token too. */
  secrets: boolean;
  envFile?: string;
  /** Encrypt with this passphrase (encryption.ts). */
  passphrase?: string;
  /** Who gets the archive (the person who ran `make backup`); else whoever this process is. */
  owner?: { uid: number; gid: number };
  /** How ext4 workspace images are read (Docker); null where there is none. */
  images: ImageReader | null;
  /** Scheduled backups: keep the newest this many scheduled archives, remove older ones. */
  keep?: number;
  now?: () => Date;
}

export interface BackupMade {
  /** The archive, as the person's machine names it. */
  path: string;
  /** The archive, as this process sees it. */
  file: string;
  bytes: number;
  files: number;
  durationMs: number;
  encrypted: boolean;
  skipped: Skipped[];
  /** Older scheduled archives removed (keep). */
  pruned: string[];
}

/** A backup runs for minutes; what one left this long ago is not still being written. */
const LEFTOVER_AGE_MS = 6 * 60 * 60 * 1000;
const SCHEDULED = /^carapace-\d{4}-\d{2}-\d{2}-\d{6}(-\d+)?-scheduled\.tar\.gz(\.enc)?$/;

function archiveName(dir: string, at: Date, kind: CreateOptions['kind'], encrypted: boolean): string {
  const stamp = at.toISOString().replace(/:/g, '').replace('T', '-').slice(0, 17);
  const tail = `${kind === 'scheduled' ? '-scheduled' : ''}.tar.gz${encrypted ? '.enc' : ''}`;
  let name = `carapace-${stamp}${tail}`;
  for (let n = 2; existsSync(join(dir, name)); n++) name = `carapace-${stamp}-${n}${tail}`;
  return name;
}

/** A log copied while it is appended to may end inside a line: kept up to its last whole line. */
function toLastLine(file: string): void {
  const size = statSync(file).size;
  if (size === 0) return;
  const fd = openSync(file, 'r');
  try {
    const tail = Buffer.alloc(Math.min(size, 1 << 20));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    if (tail[tail.length - 1] === 0x0a) return;
    const last = tail.lastIndexOf(0x0a);
    truncateSync(file, last === -1 ? (size > tail.length ? size : 0) : size - tail.length + last + 1);
  } finally {
    closeSync(fd);
  }
}

function isGone(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === 'ENOENT';
}

async function stage(options: CreateOptions, staging: string): Promise<{ skipped: Skipped[]; versions: Map<string, number>; workspaces: Manifest['workspaces'] }> {
  const found = collect(options.volumes, { secrets: options.secrets, exclude: [resolve(options.outDir)] });
  const skipped = [...found.skipped];
  const versions = new Map<string, number>();
  for (const item of found.items) {
    const target = join(staging, item.path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    try {
      if (item.kind === 'sqlite') versions.set(item.path, (await copyDatabase(item.source, target)).userVersion);
      else copyFileSync(item.source, target);
      if (item.path.startsWith('logs/')) toLastLine(target);
      chmodSync(target, item.mode);
    } catch (err) {
      if (isGone(err)) continue; // removed while we walked (a rotated log, a temp file)
      if (!(err instanceof DamagedDatabase)) throw err;
      skipped.push({ path: item.path, reason: `a damaged database, left out (${err.message})` });
    }
  }
  for (const ws of found.workspaces) {
    const into = join(staging, ws.path);
    if (ws.kind === 'folder') skipped.push(...copyFolder(ws.source, into, ws.path));
    else if (options.images) skipped.push(...(await options.images.read(ws.group, ws.source, into, ws.path)));
    else fail('BACKUP_WORKSPACE_UNREADABLE', `the workspace of group "${ws.group}" is an ext4 image and this backup has no Docker engine to read it through`, 'run `make backup` (it reads images through Docker), or run the backup where the Docker socket is reachable');
  }
  if (options.secrets) {
    if (options.envFile && existsSync(options.envFile)) {
      mkdirSync(join(staging, 'secrets'), { mode: 0o700 });
      copyFileSync(options.envFile, join(staging, 'secrets', '.env'));
      chmodSync(join(staging, 'secrets', '.env'), 0o600);
    } else skipped.push({ path: 'secrets/.env', reason: 'no .env was found to include' });
  }
  const workspaces = found.workspaces.filter((w) => !w.path.endsWith('.pre-quota')).map((w) => ({ group: w.group, from: w.kind === 'image' ? ('image' as const) : ('folder' as const) }));
  return { skipped, versions, workspaces };
}

async function describe(staging: string, versions: Map<string, number>): Promise<ManifestFile[]> {
  const files: ManifestFile[] = [];
  for (const { path, stat } of walkFiles(staging).files) {
    const rel = relative(staging, path);
    if (rel === MANIFEST) continue;
    const { size, sha256 } = await hashFile(path);
    const file: ManifestFile = { path: rel, size, sha256, mode: mode(stat) };
    const version = versions.get(rel);
    if (version !== undefined) file.sqlite = { user_version: version };
    files.push(file);
  }
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Removes scheduled archives past the newest `keep`; a person's own archives are never touched. */
function prune(dir: string, keep: number): string[] {
  const scheduled = readdirSync(dir).filter((n) => SCHEDULED.test(n)).sort();
  const old = scheduled.slice(0, Math.max(0, scheduled.length - keep));
  for (const name of old) rmSync(join(dir, name), { force: true });
  return old;
}

/** What a backup killed part way left (its staging folder, its partial archive), once it is surely not running. */
function sweepLeftovers(dir: string, now: number): void {
  for (const name of readdirSync(dir)) {
    if (!name.startsWith('.staging-') && !(name.startsWith('.carapace-') && name.endsWith('.partial'))) continue;
    const path = join(dir, name);
    if (now - statSync(path).mtimeMs > LEFTOVER_AGE_MS) rmSync(path, { recursive: true, force: true });
  }
}

async function make(options: CreateOptions, started: Date): Promise<BackupMade> {
  mkdirSync(options.outDir, { recursive: true });
  sweepLeftovers(options.outDir, started.getTime());
  const staging = mkdtempSync(join(options.outDir, '.staging-'));
  chmodSync(staging, 0o700);
  let partial: string | null = null;
  try {
    const { skipped, versions, workspaces } = await stage(options, staging);
    const files = await describe(staging, versions);
    const manifest: Manifest = { format: FORMAT_VERSION, carapace_version: APP_VERSION, created_at: started.toISOString(), secrets: options.secrets, files, skipped, workspaces };
    writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    const name = archiveName(options.outDir, started, options.kind, Boolean(options.passphrase));
    partial = join(options.outDir, `.${name}.partial`);
    const bytes = await writeArchive(staging, files.map((f) => f.path), partial, options.passphrase);
    if (options.owner && (options.owner.uid !== process.getuid?.() || options.owner.gid !== process.getgid?.())) chownSync(partial, options.owner.uid, options.owner.gid);
    chmodSync(partial, 0o600);
    const file = join(options.outDir, name);
    renameSync(partial, file);
    partial = null;
    const pruned = options.kind === 'scheduled' && options.keep ? prune(options.outDir, options.keep) : [];
    const path = options.hostDir ? join(options.hostDir, name) : file;
    return { path, file, bytes, files: files.length, durationMs: Date.now() - started.getTime(), encrypted: Boolean(options.passphrase), skipped, pruned };
  } finally {
    if (partial) rmSync(partial, { force: true });
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Makes a backup and records its outcome (data/backup-status.json); never throws. */
export async function createBackup(options: CreateOptions): Promise<Result<BackupMade>> {
  const started = options.now?.() ?? new Date();
  const result = await asResult(
    () => make(options, started),
    (message) => ({ code: 'BACKUP_FAILED', message: `the backup could not be made: ${message}`, fix: 'see the message; check free space and permissions in the backups folder' }),
  );
  const outcome: BackupOutcome = result.ok
    ? { id: randomUUID(), at: started.toISOString(), kind: options.kind, ok: true, path: result.value.path, bytes: result.value.bytes, files: result.value.files, duration_ms: result.value.durationMs, encrypted: result.value.encrypted, skipped: result.value.skipped.length }
    : { id: randomUUID(), at: started.toISOString(), kind: options.kind, ok: false, code: result.problem.code, message: result.problem.message, duration_ms: Date.now() - started.getTime() };
  try {
    recordOutcome(options.volumes.data, outcome);
  } catch {
    // The data folder is read-only or full: the archive (or the error) is what matters here.
  }
  return result;
}
