// The disk images behind the "loop" storage (storage.ts): the one-shot root helper that makes,
// grows, allocates and attaches them, its script, and the small rules around them (sizes,
// device lists, volume options and names). Also used by backups, which read an image
// through a loop device (backup/workspaces.ts).
import { existsSync, lstatSync, readdirSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';

const MiB = 1024 * 1024;
/** The agents' user: the helper hands a new or seeded image's files to it. */
const AGENT_UID = 1000;

/**
 * The helper's script: for each "<image> <bytes> <seed|->", make the image if it is
 * missing (seeded from the old folder), grow it if the quota grew, allocate every block of
 * it on the host, attach it to a loop device unless one already serves it, and print that
 * device. Shrinking is not done: a lower quota applies to new groups only (resize2fs could
 * lose nothing, but may fail).
 *
 * Allocated in full (issue 22): a sparse image let the agent's writes succeed in the page
 * cache while a full host disk turned them into zeroes. The quota is space the group really
 * has; a host disk that cannot hold it refuses the workspace (exit 3, NO_SPACE) instead.
 */
export const HELPER_SCRIPT = `set -eu
while [ $# -ge 3 ]; do
  img=$1; size=$2; seed=$3; shift 3
  if [ ! -e "$img" ]; then
    rm -f "$img.new"
    truncate -s "$size" "$img.new"
    chmod 600 "$img.new"
    if [ "$seed" = - ]; then
      mkfs.ext4 -q -F -m 0 -E root_owner=${AGENT_UID}:${AGENT_UID} "$img.new" >&2
    else
      # The agent's workspace is the agent's: a file the user put there as another uid
      # becomes uid 1000's (as the old folder's top always was).
      chown -R -h ${AGENT_UID}:${AGENT_UID} "$seed"
      mkfs.ext4 -q -F -m 0 -E root_owner=${AGENT_UID}:${AGENT_UID} -d "$seed" "$img.new" >&2
    fi
    mv "$img.new" "$img"
  fi
  dev=$(losetup -j "$img" | head -n 1 | cut -d: -f1)
  if [ "$(stat -c %s "$img")" -lt "$size" ]; then
    if [ -n "$dev" ]; then losetup -d "$dev"; dev=; fi
    truncate -s "$size" "$img"
    e2fsck -f -y "$img" >&2 || [ $? -le 1 ]
    resize2fs "$img" >&2
  fi
  # Every block, also of an image an older version made sparse (mkfs and resize2fs may punch holes).
  if ! fallocate -l "$(stat -c %s "$img")" "$img"; then
    echo "NO_SPACE: the host's disk cannot hold $img ($(stat -c %s "$img") bytes)" >&2
    exit 3
  fi
  if [ -z "$dev" ]; then dev=$(losetup -f --show "$img"); fi
  echo "$dev"
done
`;

/** The host's disk cannot hold a group's workspace at its quota: the agent is not started. */
export class NoDiskSpace extends Error {
  readonly code = 'NO_DISK_SPACE';
}

/** The image size for a quota, grown to fit an old folder's content (plus ext4's overhead) if that is larger. */
export function imageBytes(quotaMb: number, seedBytes: number): number {
  const quota = quotaMb * MiB;
  if (seedBytes <= 0) return quota;
  const fit = Math.ceil((seedBytes * 1.25 + 16 * MiB) / MiB) * MiB;
  return Math.max(quota, fit);
}

/** The loop devices the helper printed, one per plan, or an error naming what it said instead. */
export function parseDevices(output: string, count: number): string[] {
  const devices = output.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (devices.length !== count || !devices.every((d) => /^\/dev\/loop\d+$/.test(d))) {
    throw new Error(`disk quota helper: expected ${count} loop device(s), got ${JSON.stringify(output.slice(-500))}`);
  }
  return devices;
}

/** Whether an existing volume already mounts this device as ext4 (after a reboot the device may differ). */
export function volumeMatches(options: Record<string, string> | null | undefined, device: string): boolean {
  return options?.type === 'ext4' && options.device === device && options.o === VOLUME_OPTIONS;
}

/**
 * No `discard`, and `noinit_itable`: neither a delete in the workspace nor the kernel's lazy
 * zeroing of inode tables may punch holes in the image through the loop device (its blocks
 * stay the group's, allocated). errors=remount-ro: after an I/O error the file system stops
 * taking writes rather than reporting success for what it cannot keep.
 */
export const VOLUME_OPTIONS = 'nosuid,nodev,noinit_itable,errors=remount-ro';

export function volumeName(instance: string, group: string): string {
  return `carapace-${instance}-${group}-workspace`;
}

/** `measure` summed over everything under a folder (links not followed). */
function sumTree(dir: string, measure: (stat: Stats) => number): number {
  let total = 0;
  const stack = [dir];
  while (stack.length) {
    const current = stack.pop()!;
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      total += measure(lstatSync(path));
      if (entry.isDirectory()) stack.push(path);
    }
  }
  return total;
}

/** Bytes in a folder tree (apparent sizes of what is not a folder). */
export function treeBytes(dir: string): number {
  return sumTree(dir, (stat) => (stat.isDirectory() ? 0 : stat.size));
}

/** Bytes allocated on disk under a folder (blocks, not apparent sizes). */
export function allocatedBytes(dir: string): number {
  return sumTree(dir, (stat) => stat.blocks * 512);
}

/**
 * A one-shot root container from `image` that runs `script` (sh) with `args`: the loop
 * devices and `folder` (a host path, mounted at the same path) only, no network, read-only
 * root. Its exit status, stdout and the end of its stderr. Also used by backups
 * (backup/workspaces.ts), which read a workspace image through a loop device.
 */
export async function runDiskHelper(docker: Docker, spec: { image: string; script: string; args: string[]; folder: string; labels: Record<string, string> }): Promise<{ status: number | undefined; stdout: string; stderr: string }> {
  const container = await docker.createContainer({
    Image: spec.image,
    User: '0:0',
    Entrypoint: ['sh', '-c', spec.script, 'carapace-disk'],
    Cmd: spec.args,
    NetworkDisabled: true,
    Labels: spec.labels,
    HostConfig: {
      Binds: ['/dev:/dev', `${spec.folder}:${spec.folder}:rw`],
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      // Not --privileged: losetup needs only CAP_SYS_ADMIN, the loop devices (block major
      // 7) and /dev/loop-control (char 10:237); DAC_OVERRIDE writes the images into the
      // core's folders and reads old workspaces to seed them, CHOWN hands those to uid
      // 1000. /dev is the host's, so a loop device the kernel creates meanwhile is there.
      CapDrop: ['ALL'],
      CapAdd: ['SYS_ADMIN', 'DAC_OVERRIDE', 'CHOWN'],
      DeviceCgroupRules: ['b 7:* rwm', 'c 10:237 rwm'],
      SecurityOpt: ['no-new-privileges'],
      AutoRemove: false,
    },
  });
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (c: Buffer) => (out = (out + c.toString('utf8')).slice(-4000)));
    stderr.on('data', (c: Buffer) => (err = (err + c.toString('utf8')).slice(-2000)));
    docker.modem.demuxStream(stream, stdout, stderr);
    const ended = new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', resolve);
    });
    await container.start();
    const result = (await container.wait()) as { StatusCode?: number };
    await ended;
    return { status: result.StatusCode, stdout: out, stderr: err };
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}

/**
 * Whether a loop device still has a file behind it (the host's sysfs, visible in a
 * container too). Where /sys/block cannot be read, assume so: the engine's mount fails
 * clearly if not.
 */
export function attached(device: string): boolean {
  const sys = `/sys/block/${device.replace('/dev/', '')}`;
  if (!existsSync('/sys/block')) return true;
  return existsSync(`${sys}/loop/backing_file`);
}

