// The sandbox runs of one core, put together from what main.ts (and the docker tests)
// have: the Docker runtime (its engine, its runtime choice, host paths), the groups'
// workspace storage, the audit log and carapace.json's `sandbox` section.
import type { DockerRuntime } from '../agents/docker-runtime.js';
import type { GroupStorage } from '../agents/storage.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { SandboxSettings } from '../config.js';
import { ToolFailure } from '../protocol/errors.js';
import { ProgramRuns } from './program-runs.js';
import { sweep } from './run-exec.js';
import { sandboxError, WarmSandboxes } from './warm-sandboxes.js';

export interface SandboxRunsOptions {
  runtime: DockerRuntime;
  storage: GroupStorage;
  audit: AuditLog;
  settings: SandboxSettings;
  /** Labels the sandboxes (carapace.instance), so that start-up removes this core's leftovers only. */
  instance: string;
}

export interface SandboxRuns {
  runs: ProgramRuns;
  sandboxes: WarmSandboxes;
}

/**
 * The OCI runtime for sandboxes under `setting` (the agents' by default), as a function
 * asked at each new sandbox. The engine's word that it has runsc is asked once it says
 * yes (~15 ms each time): an engine that lost it since refuses the container (the run
 * fails, never under another runtime).
 */
export function sandboxRuntime(setting: SandboxSettings['runtime'], runtime: DockerRuntime): () => Promise<'runsc' | 'runc' | ToolFailure> {
  let hasRunsc = false;
  return async () => {
    if (setting === 'runc') return 'runc';
    if (setting === 'agents') return (await runtime.sandbox()).runtime;
    if (hasRunsc) return 'runsc';
    const info = (await runtime.docker.info().catch(() => null)) as { Runtimes?: Record<string, unknown> } | null;
    hasRunsc = Boolean(info?.Runtimes?.runsc);
    return hasRunsc ? 'runsc' : sandboxError('SANDBOX_UNAVAILABLE', 'sandbox.runtime is "runsc" in carapace.json, but the Docker engine has no runsc runtime', false);
  };
}

export function sandboxRuns(options: SandboxRunsOptions): SandboxRuns {
  const { runtime, storage, audit, settings, instance } = options;
  const sandboxes = new WarmSandboxes({
    docker: runtime.docker,
    image: settings.image,
    instance,
    limits: { memory_mb: settings.memory_mb, cpus: settings.cpus, pids: settings.pids },
    idleMs: settings.idle_minutes * 60_000,
    runtime: sandboxRuntime(settings.runtime, runtime),
    workspace: async (group) => {
      const mount = (await storage.mounts(group)).find((m) => m.target === '/workspace/group');
      if (!mount) throw new Error(`group ${group} has no workspace`);
      return mount.volume ? { source: mount.source, volume: true } : { source: await runtime.hostPath(mount.source), volume: false };
    },
    sweep: (id) => sweep(runtime.docker, id),
    report: (session, group, reason) => audit.record({ group, session, source: 'core', topic: 'tool.invoke.run_program', correlation: null, stage: 'handler', outcome: 'error', code: 'RUN_KILLED', reason }),
  });
  const runs = new ProgramRuns({ docker: runtime.docker, audit, sandboxes, maxTimeoutS: settings.timeout_s, memoryMb: settings.memory_mb });
  return { runs, sandboxes };
}
