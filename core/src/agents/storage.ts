// A group's writable storage on disk (its workspace), and the quota that holds it. (Claude
// Code's state is a tmpfs of each container: bounded and gone with it, see agent-manager.)
// Two kinds:
// - "loop": each is an ext4 file system in a sparse image file, exactly the quota in
//   size, attached to a loop device and mounted by the engine as a `local` Docker volume
//   (type ext4, device /dev/loopN). A write past the quota gets ENOSPC inside the
//   container; the host gains at most the image's size. The engine mounts it, so the
//   unprivileged core needs no mount rights; the images are made and attached by a short
//   one-shot helper container (mkfs.ext4, losetup; CAP_SYS_ADMIN and the loop devices
//   only). The `local` driver cannot attach a loop device itself: `o=loop` is a mount(8)
//   option, and moby calls mount(2), which refuses it ("invalid argument") and a plain
//   file as a device ("block device required").
// - "watchdog" (agents.disk_quota_mode: "watchdog", for engines that cannot attach a loop
//   device, e.g. rootless Docker): host bind mounts, and the core measures them every few
//   seconds while the agent runs; past the quota the agent is stopped and the user told.
//   Weaker: a fast writer gets ahead of it by whatever it writes between two looks.
// - "off" (agents.disk_quota_mb: 0): host bind mounts, no limit, as before.
import { existsSync, mkdirSync, readFileSync, chownSync, renameSync } from 'node:fs';
import { basename, join } from 'node:path';
import type Docker from 'dockerode';
import type { AgentSettings } from '../config.js';
import { LABELS, type MountSpec } from './runtime.js';
import { allocatedBytes, attached, HELPER_SCRIPT, imageBytes, NoDiskSpace, parseDevices, runDiskHelper, treeBytes, VOLUME_OPTIONS, volumeMatches, volumeName } from './disk-image.js';

export * from './disk-image.js';

const AGENT_UID = 1000;
const MiB = 1024 * 1024;

export type QuotaMode = 'loop' | 'watchdog' | 'off';

export interface GroupStorage {
  readonly mode: QuotaMode;
  /** The mount for /workspace/group, ready before the container starts. */
  mounts(group: string): Promise<MountSpec[]>;
  /** What the core logs at start-up. */
  describe(): Record<string, unknown>;
  /**
   * Watchdog mode only: looks at the group's usage while its agent runs and calls
   * `over` once if it passes the quota. Returns the function that stops looking.
   */
  watch?(group: string, over: (usedBytes: number, quotaBytes: number) => void): () => void;
  /** The core stops (its agents are gone): what it attached for the workspaces is detached. */
  release?(): Promise<void>;
  /**
   * Errors the kernel counted on the group's workspace file system (ext4's errors_count in
   * sysfs, which a container sees too): an I/O error under it, or a host disk that failed it.
   */
  fsErrors?(group: string): Promise<number>;
}

export interface StoragePaths {
  groupsDir: string;
  instance: string;
}

/** No quota: the host folders themselves, bind-mounted. */
export class BindStorage implements GroupStorage {
  readonly mode: QuotaMode = 'off';
  constructor(protected readonly paths: StoragePaths) {}

  async mounts(group: string): Promise<MountSpec[]> {
    return [{ source: ownedDir(this.folder(group)), target: '/workspace/group', readOnly: false }];
  }

  protected folder(group: string): string {
    return join(this.paths.groupsDir, group);
  }

  describe(): Record<string, unknown> {
    return { mode: this.mode, warning: 'agents.disk_quota_mb is 0: an agent can fill the host disk' };
  }
}

/** Bind mounts measured while the agent runs: the fallback where no loop device can be had. */
export class WatchdogStorage extends BindStorage {
  override readonly mode: QuotaMode = 'watchdog';
  private readonly quotaBytes: number;

  constructor(
    paths: StoragePaths,
    settings: Pick<AgentSettings, 'disk_quota_mb'>,
    private readonly intervalMs = 5_000,
  ) {
    super(paths);
    this.quotaBytes = settings.disk_quota_mb * MiB;
  }

  /** A group already over its quota does not start: it would only be stopped again. */
  override async mounts(group: string): Promise<MountSpec[]> {
    const mounts = await super.mounts(group);
    const used = this.used(group);
    if (used > this.quotaBytes) throw new Error(`group ${group} uses ${mb(used)} MB of disk, over its quota of ${mb(this.quotaBytes)} MB`);
    return mounts;
  }

  override describe(): Record<string, unknown> {
    return { mode: this.mode, quota_mb: this.quotaBytes / MiB, interval_ms: this.intervalMs, warning: 'watchdog only: a fast writer can pass the quota by what it writes between two looks' };
  }

  watch(group: string, over: (usedBytes: number, quotaBytes: number) => void): () => void {
    const timer = setInterval(() => {
      let used: number;
      try {
        used = this.used(group);
      } catch {
        return; // a file vanished mid-walk: look again next time
      }
      if (used <= this.quotaBytes) return;
      clearInterval(timer);
      over(used, this.quotaBytes);
    }, this.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Allocated bytes (what fills a disk, fallocate included) of the group's workspace. */
  used(group: string): number {
    const dir = this.folder(group);
    return existsSync(dir) ? allocatedBytes(dir) : 0;
  }
}

function mb(bytes: number): number {
  return Math.round(bytes / MiB);
}

/** What the loop kind needs from the engine: the Docker API, and host paths for the core's paths. */
export interface Engine {
  docker: Docker;
  hostPath(local: string): Promise<string>;
}

/** One file system of a group: where its image is, how big, what seeds it on first use. */
export interface DiskPlan {
  /** The image file, as the core sees it. */
  image: string;
  bytes: number;
  /** The folder of the time before quotas, copied into a new image (then set aside). */
  seed: string | null;
  volume: string;
  target: string;
}

export class LoopStorage implements GroupStorage {
  readonly mode: QuotaMode = 'loop';
  /** The loop devices of each group's images, found (or attached) once per core run. */
  private readonly devices = new Map<string, Promise<string[]>>();

  constructor(
    private readonly engine: Engine,
    private readonly paths: StoragePaths,
    private readonly settings: Pick<AgentSettings, 'image' | 'disk_quota_mb'>,
  ) {}

  describe(): Record<string, unknown> {
    return { mode: this.mode, workspace_mb: this.settings.disk_quota_mb };
  }

  /**
   * The helper runs once per group per core run (or again if a device was detached
   * meanwhile); the volumes are checked at every start: a Bind naming a missing volume
   * would have the engine create a plain, unlimited one.
   */
  async mounts(group: string): Promise<MountSpec[]> {
    let pending = this.devices.get(group);
    if (pending && !(await pending.catch(() => [])).every(attached)) pending = undefined;
    if (!pending) {
      pending = this.attach(group);
      this.devices.set(group, pending);
      pending.catch(() => this.devices.delete(group));
    }
    const devices = await pending;
    const plans = this.plans(group);
    for (const [i, p] of plans.entries()) await this.ensureVolume(p.volume, devices[i]!, group);
    return plans.map((p) => ({ source: p.volume, target: p.target, readOnly: false, volume: true }));
  }

  async fsErrors(group: string): Promise<number> {
    const devices = await this.devices.get(group)?.catch(() => null);
    let errors = 0;
    for (const device of devices ?? []) {
      try {
        errors += Number(readFileSync(`/sys/fs/ext4/${basename(device)}/errors_count`, 'utf8').trim()) || 0;
      } catch {
        // not mounted (yet), or no sysfs here: nothing counted
      }
    }
    return errors;
  }

  plans(group: string): DiskPlan[] {
    const image = join(this.paths.groupsDir, `${group}.img`);
    const old = join(this.paths.groupsDir, group);
    const seed = !existsSync(image) && existsSync(old) ? old : null;
    return [{ image, bytes: imageBytes(this.settings.disk_quota_mb, seed ? treeBytes(seed) : 0), seed, volume: volumeName(this.paths.instance, group), target: '/workspace/group' }];
  }

  private async attach(group: string): Promise<string[]> {
    mkdirSync(this.paths.groupsDir, { recursive: true });
    const plans = this.plans(group);
    const args: string[] = [];
    for (const p of plans) args.push(await this.engine.hostPath(p.image), String(p.bytes), p.seed ? await this.engine.hostPath(p.seed) : '-');
    const devices = parseDevices(await this.helper(group, HELPER_SCRIPT, args), plans.length);
    // Migrated: the old folder is kept, renamed, never deleted (group names have no dots).
    // Also when a crash came between the image and the rename: the next attach finishes it.
    const old = join(this.paths.groupsDir, group);
    if (existsSync(old)) renameSync(old, freeName(`${old}.pre-quota`));
    return devices;
  }

  private async ensureVolume(name: string, device: string, group: string): Promise<void> {
    const volume = this.engine.docker.getVolume(name);
    const info = await volume.inspect().catch((err: { statusCode?: number }) => {
      if (err.statusCode === 404) return null;
      throw err;
    });
    if (info && volumeMatches(info.Options, device)) return;
    if (info) await volume.remove();
    await this.engine.docker.createVolume({
      Name: name,
      Driver: 'local',
      DriverOpts: { type: 'ext4', device, o: VOLUME_OPTIONS },
      Labels: { [LABELS.managed]: 'true', [LABELS.instance]: this.paths.instance, [LABELS.group]: group },
    });
  }

  /**
   * Runs `script` (sh, root) in a one-shot container from the agent image, with the
   * image folders at their host paths; its stdout, or an error with its stderr.
   */
  private async helper(group: string, script: string, args: string[]): Promise<string> {
    // Mounted at its host path, so that the paths in `args` mean the same inside.
    const host = await this.engine.hostPath(this.paths.groupsDir);
    const labels = { [LABELS.managed]: 'true', [LABELS.instance]: this.paths.instance, [LABELS.group]: group, 'carapace.role': 'disk-helper' };
    const run = await runDiskHelper(this.engine.docker, { image: this.settings.image, script, args, folder: host, labels });
    if (run.status === 3 && run.stderr.includes('NO_SPACE')) {
      throw new NoDiskSpace(`the host's disk has no room for the workspace of group "${group}" at its quota (agents.disk_quota_mb, allocated in full): free some space on the host or lower the quota`);
    }
    if (run.status !== 0) throw new Error(`disk quota helper failed (exit ${run.status}): ${run.stderr.trim() || run.stdout.trim()}`);
    return run.stdout;
  }

  /**
   * Removes a group's volumes and detaches its loop devices; with `images`, deletes the
   * image files too (its data). For tests and for removing a group for good.
   */
  async destroy(group: string, images: boolean): Promise<void> {
    await this.detach([group], images);
  }

  /**
   * The core stops: the volumes and loop devices of every group it attached this run are
   * released (the next start attaches them again in ~0.2 s each), so that `docker compose
   * down` leaves no loop device behind until a reboot.
   */
  async release(): Promise<void> {
    const groups = [...this.devices.keys()];
    if (groups.length > 0) await this.detach(groups, false);
  }

  private async detach(groups: string[], images: boolean): Promise<void> {
    const plans = groups.flatMap((group) => this.plans(group));
    for (const p of plans) await this.engine.docker.getVolume(p.volume).remove().catch(() => undefined);
    for (const group of groups) this.devices.delete(group);
    const args: string[] = [];
    for (const p of plans) args.push(await this.engine.hostPath(p.image));
    const script = `for img in "$@"; do for dev in $(losetup -j "$img" | cut -d: -f1); do losetup -d "$dev"; done; ${images ? 'rm -f "$img";' : ''} done`;
    await this.helper(groups[0], script, args);
  }
}

/** `path`, or `path.1`, `path.2`, ... whichever does not exist yet. */
function freeName(path: string): string {
  let candidate = path;
  for (let i = 1; existsSync(candidate); i++) candidate = `${path}.${i}`;
  return candidate;
}

/** A directory the unprivileged agent user can write. */
function ownedDir(path: string): string {
  if (!existsSync(path)) mkdirSync(path, { recursive: true });
  if (process.getuid?.() === 0) chownSync(path, AGENT_UID, AGENT_UID);
  return path;
}

/** The engine behind a runtime that has one (DockerRuntime); fakes in tests have none. */
export function engineOf(runtime: object): Engine | null {
  const candidate = runtime as Partial<Engine>;
  return candidate.docker && typeof candidate.hostPath === 'function' ? (candidate as Engine) : null;
}

/** The storage the settings ask for: quota 0 turns it off; an engine is needed for the loop kind. */
export function groupStorage(settings: Pick<AgentSettings, 'image' | 'disk_quota_mb' | 'disk_quota_mode'>, paths: StoragePaths, engine: Engine | null): GroupStorage {
  if (settings.disk_quota_mb === 0) return new BindStorage(paths);
  if (settings.disk_quota_mode === 'watchdog' || engine === null) return new WatchdogStorage(paths, settings);
  return new LoopStorage(engine, paths, settings);
}
