// How the core makes a scheduled backup. In Compose the core runs as uid 1000 and cannot
// read the plugins' folders (each 0700, its plugin's uid): it starts the same one-off
// container `make backup` runs, from its own image, as root, through the Docker socket,
// with the installation's folders at their host paths (DockerRuntime.hostPath). Outside a
// container (tests, a core run by hand as root) the backup runs in the core's process. Either
// way the backup records its own outcome (status.ts); a runner records one only when the
// backup never got that far (the container could not start).
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { LABELS } from '../agents/runtime.js';
import type { VolumePaths } from './collect.js';
import { createBackup } from './create.js';
import { recordOutcome } from './status.js';
import type { ImageReader } from './workspaces.js';

/** Makes one scheduled backup; resolves when it has ended, whatever its outcome. */
export type BackupRunner = () => Promise<void>;

export interface RunnerSettings {
  volumes: VolumePaths;
  /** The backups folder, as the core sees it. */
  outDir: string;
  keep: number;
  passphrase: string | undefined;
}

/** The folder's owner gets the archives (the person who made or synced it), when we are root. */
function ownerOf(dir: string): { uid: number; gid: number } | undefined {
  try {
    const stat = statSync(dir);
    return { uid: stat.uid, gid: stat.gid };
  } catch {
    return undefined;
  }
}

export function inProcessRunner(settings: RunnerSettings, images: ImageReader | null): BackupRunner {
  return async () => {
    await createBackup({ ...settings, kind: 'scheduled', secrets: false, owner: process.getuid?.() === 0 ? ownerOf(settings.outDir) : undefined, images });
  };
}

export interface ContainerEngine {
  docker: Docker;
  hostPath(local: string): Promise<string>;
}

/** A backup that runs longer than this is stopped (and recorded as failed). */
const CONTAINER_LIMIT_MS = 3 * 60 * 60 * 1000;

export function containerRunner(settings: RunnerSettings, engine: ContainerEngine, image: string, instance: string): BackupRunner {
  const failed = (message: string): void => {
    try {
      recordOutcome(settings.volumes.data, { id: randomUUID(), at: new Date().toISOString(), kind: 'scheduled', ok: false, code: 'BACKUP_FAILED', message });
    } catch {
      // the data folder cannot be written: the audit entry below is all there is
    }
  };
  return async () => {
    let container: Docker.Container | null = null;
    try {
      const host = {
        config: await engine.hostPath(settings.volumes.config),
        data: await engine.hostPath(settings.volumes.data),
        logs: await engine.hostPath(settings.volumes.logs),
        groups: await engine.hostPath(settings.volumes.groups),
        out: await engine.hostPath(settings.outDir),
      };
      container = await engine.docker.createContainer({
        Image: image,
        User: '0:0',
        WorkingDir: '/app',
        Entrypoint: ['node', 'dist/core/src/backup/cli.js'],
        Cmd: ['create', '--scheduled', '--keep', String(settings.keep), '--out', '/backups', '--host-dir', host.out],
        Env: [`CARAPACE_INSTANCE=${instance}`, ...(settings.passphrase ? [`CARAPACE_BACKUP_PASSPHRASE=${settings.passphrase}`] : [])],
        Labels: { [LABELS.managed]: 'true', [LABELS.instance]: instance, 'carapace.role': 'backup' },
        NetworkDisabled: true,
        HostConfig: {
          Binds: [
            `${host.config}:/app/volumes/config:ro`,
            `${host.data}:/app/volumes/data`,
            `${host.logs}:/app/volumes/logs:ro`,
            `${host.groups}:/app/volumes/groups:ro`,
            `${host.out}:/backups`,
            // Workspace images are read through the engine (backup/workspaces.ts).
            '/var/run/docker.sock:/var/run/docker.sock',
          ],
          NetworkMode: 'none',
          ReadonlyRootfs: true,
          Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=64m' },
          // Root reads every plugin's folder (DAC_READ_SEARCH, DAC_OVERRIDE) and hands the
          // archive to the folder's owner (CHOWN, FOWNER); nothing else.
          CapDrop: ['ALL'],
          CapAdd: ['DAC_READ_SEARCH', 'DAC_OVERRIDE', 'CHOWN', 'FOWNER'],
          SecurityOpt: ['no-new-privileges'],
        },
      });
      const stream = await container.attach({ stream: true, stdout: true, stderr: true });
      let output = '';
      const sink = new PassThrough();
      sink.on('data', (c: Buffer) => (output = (output + c.toString('utf8')).slice(-4000)));
      engine.docker.modem.demuxStream(stream, sink, sink);
      await container.start();
      const started = container;
      const timer = setTimeout(() => void started.kill().catch(() => undefined), CONTAINER_LIMIT_MS);
      const result = (await container.wait().finally(() => clearTimeout(timer))) as { StatusCode?: number };
      // Exit 1 with its one line: the backup recorded that outcome itself.
      if (result.StatusCode !== 0 && !/carapace: [A-Z_]+: /.test(output)) failed(`the backup container ended with status ${result.StatusCode}: ${output.trim().slice(-500)}`);
    } catch (err) {
      failed(`the backup container could not run: ${(err as Error).message}`);
    } finally {
      await container?.remove({ force: true }).catch(() => undefined);
    }
  };
}
