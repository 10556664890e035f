// Each group's workspace, copied into the staging folder as plain files.
//
// A workspace held as an ext4 image (agents/storage.ts, loop mode) is read through the
// kernel's own mount of it, never by parsing the image ourselves and never by copying the
// image: an image is the group's whole quota (2 GiB by default, allocated in full), while
// its files are what matters, and a restore as a plain folder lets the next attach seed a
// fresh image from it at whatever quota is configured then. This is the simplest way that is
// consistent: a file system mounted twice from two loop devices could read stale metadata
// while an agent writes, so
//   - an image the core has attached (its loop device is there) is read through that very
//     device: the core's own volume when it exists (the engine shares one mount among all
//     its users), else a volume of ours on the same device: one file system, one page
//     cache, each file as it is at the moment it is read;
//   - an image nobody has attached is attached read-only (losetup -r, by the one-shot disk
//     helper the core uses, see runDiskHelper) and mounted `ro,noload`: nothing writes it,
//     so it is as consistent as it was left (an unclean stop of the core leaves the journal
//     unreplayed; `noload` then shows the last checkpoint rather than write to the image).
// The files come out through the engine's archive API (GET /containers/<id>/archive) of a
// container that is created with the volume mounted read-only and never started: nothing
// runs, and no tool of any image is needed. Only regular files and folders are kept; a
// link an agent made is left out and said (restored, it could point anywhere on the host).
import { randomBytes } from 'node:crypto';
import { copyFileSync, chmodSync, mkdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { Readable } from 'node:stream';
import * as tar from 'tar';
import { LABELS } from '../agents/runtime.js';
import { runDiskHelper, volumeMatches, volumeName, VOLUME_OPTIONS } from '../agents/disk-image.js';
import type { Engine } from '../agents/storage.js';
import { withUnstartedContainer } from '../agents/workspace-reader.js';
import { fail } from './errors.js';
import { mode, walkFiles } from './collect.js';
import type { Skipped } from './manifest.js';

/** Copies a workspace's files into `into`; what it left out. */
export interface ImageReader {
  read(group: string, image: string, into: string, archived: string): Promise<Skipped[]>;
}

/** A plain workspace folder (no quota, or from before quotas), copied file by file. */
export function copyFolder(source: string, into: string, archived: string): Skipped[] {
  const { files, others } = walkFiles(source);
  for (const { path, stat } of files) {
    const target = join(into, relative(source, path));
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    copyFileSync(path, target);
    chmodSync(target, mode(stat));
  }
  return others.map((o) => ({ path: `${archived}/${relative(source, o)}`, reason: 'not a regular file (a link, a socket)' }));
}

/** The helper's script: the loop device already serving the image, or a read-only one attached now. */
const ATTACH = `set -eu
dev=$(losetup -j "$1" | head -n 1 | cut -d: -f1)
if [ -n "$dev" ]; then echo "existing $dev"; else echo "attached $(losetup -r -f --show "$1")"; fi`;
const DETACH = 'losetup -d "$1"';

export interface ImageReaderSettings {
  /** The image the disk helper runs from (agents.image, as storage.ts uses). */
  helperImage: string;
  /** CARAPACE_INSTANCE: whose volumes are whose. */
  instance: string;
}

export function dockerImageReader(engine: Engine, settings: ImageReaderSettings): ImageReader {
  const docker = engine.docker;
  const labels = (group: string): Record<string, string> => ({ [LABELS.managed]: 'true', [LABELS.instance]: settings.instance, [LABELS.group]: group, 'carapace.role': 'backup-reader' });
  const unreadable = (group: string, why: string): never =>
    fail('BACKUP_WORKSPACE_UNREADABLE', `the workspace of group "${group}" (an ext4 image) could not be read: ${why}`, 'run the backup where Docker is reachable (`make backup` does), or see `docker compose logs core`');

  const helper = async (group: string, script: string, image: string, folder: string): Promise<string> => {
    const run = await runDiskHelper(docker, { image: settings.helperImage, script, args: [image], folder, labels: labels(group) });
    if (run.status !== 0) unreadable(group, `disk helper exit ${run.status}: ${run.stderr.trim() || run.stdout.trim()}`);
    return run.stdout.trim();
  };

  return {
    async read(group, image, into, archived) {
      await docker.ping().catch((err: Error) => unreadable(group, `Docker cannot be reached (${err.message})`));
      const hostImage = await engine.hostPath(image);
      const [how, device] = (await helper(group, ATTACH, hostImage, dirname(hostImage))).split(' ');
      if ((how !== 'existing' && how !== 'attached') || !/^\/dev\/loop\d+$/.test(device ?? '')) unreadable(group, `unexpected helper output "${how} ${device}"`);
      const ours = `carapace-${settings.instance}-${group}-backup-${randomBytes(4).toString('hex')}`;
      let volume = ours;
      let made = false;
      try {
        const core = how === 'existing' ? await docker.getVolume(volumeName(settings.instance, group)).inspect().catch(() => null) : null;
        if (core && volumeMatches(core.Options, device)) volume = core.Name;
        else {
          // On a device the core attached: its own options (a second mount of one file system
          // must match the first). On our read-only device: read-only, journal not replayed.
          await docker.createVolume({ Name: ours, Driver: 'local', DriverOpts: { type: 'ext4', device, o: how === 'existing' ? VOLUME_OPTIONS : 'ro,noload,nosuid,nodev' }, Labels: labels(group) });
          made = true;
        }
        return await archiveOf(group, volume, into, archived);
      } finally {
        if (made) await docker.getVolume(ours).remove().catch(() => undefined);
        if (how === 'attached') await helper(group, DETACH, device, dirname(hostImage)).catch(() => undefined);
      }
    },
  };

  async function archiveOf(group: string, volume: string, into: string, archived: string): Promise<Skipped[]> {
    try {
      return await withUnstartedContainer(docker, { image: settings.helperImage, binds: [`${volume}:/w:ro,nocopy`], labels: labels(group) }, async (container) =>
        extractFiles((await container.getArchive({ path: '/w' })) as unknown as Readable, into, archived));
    } catch (err) {
      return unreadable(group, (err as Error).message);
    }
  }
}

/** A tar stream of one folder (`<name>/...`), its files and folders written under `into`; the rest said. */
async function extractFiles(stream: Readable, into: string, archived: string): Promise<Skipped[]> {
  mkdirSync(into, { recursive: true, mode: 0o700 });
  const skipped: Skipped[] = [];
  const unpack = tar.x({
    cwd: into,
    strip: 1,
    preserveOwner: false,
    maxDecompressionRatio: Infinity,
    filter: (path, entry) => {
      const type = 'type' in entry ? entry.type : 'File';
      if (type === 'File' || type === 'OldFile' || type === 'Directory') return true;
      skipped.push({ path: `${archived}/${path.split('/').slice(1).join('/')}`, reason: `not a regular file (${type})` });
      return false;
    },
    onwarn: (code, message) => skipped.push({ path: archived, reason: `${code}: ${message}` }),
  });
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject);
    unpack.on('error', reject);
    unpack.on('finish', resolve);
    stream.pipe(unpack);
  });
  return skipped;
}
