// The sandbox container one session's programs run in: what it is made of, and how it is
// held. Never the agent's own container. Hardened like an agent's or more: the agents'
// runtime (gVisor where the engine has it), no network, a read-only root, every
// capability dropped, no-new-privileges, limits on CPU, memory (swap the same) and
// processes, a sized tmpfs at /tmp and at /out, and only the group's workspace mounted,
// read-only. No Docker socket, session socket, LLM socket, secret or host environment.
//
// Its main process (`sleep infinity` under docker-init) runs as nobody (65534); every run
// is a `docker exec` as uid 1000. So a run cannot signal the sandbox's own processes, and
// `kill -9 -1` as uid 1000 ends everything a run started (run-exec.ts).
import type Docker from 'dockerode';
import { LABELS } from '../agents/runtime.js';
import type { SandboxSettings } from '../config.js';

export const ROLE_LABEL = 'carapace.role';
export const SANDBOX_ROLE = 'sandbox';
/** Where a run's program finds the group's workspace (read-only) and leaves its files. */
export const WORKSPACE_DIR = '/workspace';
export const OUT_DIR = '/out';
/** The size of /tmp and of /out, each. */
export const SCRATCH_MB = 64;
/** Files (inodes) each of /tmp and /out may hold: a run cannot spend kernel memory on millions of empty ones. */
const SCRATCH_INODES = 16_384;
export const RUN_USER = '1000:1000';
const IDLE_USER = '65534:65534';
/**
 * Under runsc the engine's process limit counts host tasks, and gVisor (ptrace platform)
 * needs several for each process of a run (its stub and threads: an idle sandbox held
 * 32-41, ten sleeping processes 119, twenty 319). gVisor itself puts no limit on a
 * sandbox's processes in this release, so `pids` becomes this many host tasks; past them
 * the whole sandbox stops (run-exec reports it), which contains a fork bomb.
 */
export function enginePidsLimit(runtime: 'runsc' | 'runc', pids: number): number {
  return runtime === 'runsc' ? 64 + pids * 12 : pids;
}

export interface SandboxSpec {
  name: string;
  image: string;
  instance: string;
  group: string;
  session: string;
  runtime: 'runsc' | 'runc';
  /** The group's workspace as a Binds entry's source: its volume's name, or its folder's host path. */
  workspace: { source: string; volume: boolean };
  limits: Pick<SandboxSettings, 'memory_mb' | 'cpus' | 'pids'>;
  /** What a skill's sandbox adds (skills/skill-sandbox.ts): its folder and relay socket, the main process, a label. */
  extra?: SandboxExtra;
}

export interface SandboxExtra {
  /** More Binds entries, each read-only. */
  binds: string[];
  /** The main process (as nobody) instead of `sleep infinity`. */
  command?: string[];
  labels: Record<string, string>;
}

export function sandboxLabels(spec: Pick<SandboxSpec, 'instance' | 'group' | 'session'>): Record<string, string> {
  return { [LABELS.managed]: 'true', [LABELS.instance]: spec.instance, [LABELS.group]: spec.group, [LABELS.session]: spec.session, [ROLE_LABEL]: SANDBOX_ROLE };
}

/** A tmpfs of SCRATCH_MB owned by the run's user. */
function scratch(): string {
  return `size=${SCRATCH_MB}m,nr_inodes=${SCRATCH_INODES},uid=1000,gid=1000,mode=0700`;
}

export function sandboxCreateOptions(spec: SandboxSpec): Docker.ContainerCreateOptions {
  const memory = spec.limits.memory_mb * 1024 * 1024;
  const labels = { ...sandboxLabels(spec), ...spec.extra?.labels };
  const workspace = spec.workspace.volume ? `${spec.workspace.source}:${WORKSPACE_DIR}:ro,nocopy` : `${spec.workspace.source}:${WORKSPACE_DIR}:ro`;
  return {
    name: spec.name,
    Image: spec.image,
    // Not the image's command: nothing but a process that keeps the sandbox up (a skill's: its relay forwarder).
    Entrypoint: spec.extra?.command ? [spec.extra.command[0]] : ['sleep'],
    Cmd: spec.extra?.command ? spec.extra.command.slice(1) : ['infinity'],
    Env: [],
    User: IDLE_USER,
    WorkingDir: WORKSPACE_DIR,
    Labels: labels,
    NetworkDisabled: true,
    HostConfig: {
      Binds: [workspace, ...(spec.extra?.binds ?? [])],
      // /out is a volume (a tmpfs the engine mounts), not the container's own tmpfs: the
      // engine's archive API reads volumes, never what a runtime mounted inside.
      Mounts: [{ Type: 'volume', Source: '', Target: OUT_DIR, VolumeOptions: { NoCopy: true, Labels: labels, DriverConfig: { Name: 'local', Options: { type: 'tmpfs', device: 'tmpfs', o: `${scratch()},nosuid,nodev` } } } }],
      Tmpfs: { '/tmp': `rw,nosuid,nodev,${scratch()}` },
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      PidsLimit: enginePidsLimit(spec.runtime, spec.limits.pids),
      Memory: memory,
      MemorySwap: memory,
      NanoCpus: Math.round(spec.limits.cpus * 1e9),
      Init: true,
      AutoRemove: false,
      Runtime: spec.runtime,
      // What a run prints reaches the core through its exec, never the engine's log files.
      LogConfig: { Type: 'none', Config: {} },
    },
  };
}
