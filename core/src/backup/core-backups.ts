// The core's backups wired up at start (main.ts): where archives go, and which runner makes
// the scheduled ones (runner.ts): a one-off container of the core's own image when the core
// runs in a container, else the core's own process.
import { dirname, resolve } from 'node:path';
import type { DockerRuntime } from '../agents/docker-runtime.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { BackupSettings } from '../config.js';
import type { Paths } from '../settings.js';
import { containerRunner, inProcessRunner } from './runner.js';
import { BackupSchedule, type ScheduleDeps } from './schedule.js';
import { dockerImageReader } from './workspaces.js';

export interface CoreBackupDeps {
  settings: BackupSettings;
  paths: Paths;
  runtime: DockerRuntime;
  audit: AuditLog;
  /** agents.image: the disk helper's image (it attaches workspace images read-only). */
  agentImage: string;
  instance: string;
  log: ScheduleDeps['log'];
}

export async function startBackups(deps: CoreBackupDeps): Promise<{ schedule: BackupSchedule; runner: 'container' | 'in-process'; dir: string }> {
  const outDir = resolve(deps.settings.dir ?? (process.env.CARAPACE_BACKUP_DIR || 'backups'));
  const volumes = { config: dirname(deps.paths.configFile), data: deps.paths.dataDir, logs: deps.paths.logDir, groups: deps.paths.groupsDir };
  const settings = { volumes, outDir, keep: deps.settings.keep, passphrase: process.env.CARAPACE_BACKUP_PASSPHRASE || undefined };
  const image = await deps.runtime.ownImage().catch(() => null);
  const run = image
    ? containerRunner(settings, deps.runtime, image, deps.instance)
    : inProcessRunner(settings, dockerImageReader(deps.runtime, { helperImage: deps.agentImage, instance: deps.instance }));
  const dir = image ? await deps.runtime.hostPath(outDir).catch(() => outDir) : outDir;
  // CARAPACE_BACKUP_CATCH_UP_MS: only for tests, which cannot wait ten minutes for the first one.
  const catchUpMs = Number(process.env.CARAPACE_BACKUP_CATCH_UP_MS) || undefined;
  const schedule = new BackupSchedule({ settings: deps.settings, dir, dataDir: deps.paths.dataDir, run, audit: deps.audit, catchUpMs, log: deps.log });
  schedule.start();
  return { schedule, runner: image ? 'container' : 'in-process', dir };
}
