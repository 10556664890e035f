// The Docker runtime: hardened agent containers through dockerode. Every property here
// is checked against a real engine by the tests (docker inspect).
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import type { FileRead } from '../files/attach-files.js';
import { readAgentFile } from './agent-file-reader.js';
import { chooseSandbox, type Sandbox, type SandboxSetting } from './sandbox.js';
import { LABELS, type AgentProcess, type AgentRuntime, type AgentSpec, type AttachedAgent } from './runtime.js';
import { changedFilesCommand, type ChangedFiles } from './workspace-labels.js';

/** exec(): output kept per call, stdout and stderr together. */
const MAX_OUTPUT = 4 * 1024 * 1024;
/** changedFiles(): a workspace of many files still answers well within this; past it, the session counts as labelled. */
const CHANGED_FILES_MS = 5000;

export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** The core's own container, when it runs in one. */
interface OwnContainer {
  info: Docker.ContainerInspectInfo;
  /** Its mounts, longest destination first: a path belongs to the most specific one. */
  mounts: { dest: string; source: string }[];
}

/**
 * The id the engine gave this container. Its /etc/hostname, /etc/hosts and
 * /etc/resolv.conf are bind-mounted from the engine's containers/<id>/ directory, so
 * mountinfo names it even where the hostname does not (network_mode: host, hostname:).
 * Only those mount points count: on a Docker host, mounts of other containers' folders
 * (under containers/<id>/) show in mountinfo too, and made a core there think it was one.
 */
export function ownContainerId(mountinfo?: string): string | null {
  let text = mountinfo;
  try {
    text ??= readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [, , , root, mountPoint] = line.split(' ');
    if (mountPoint !== '/etc/hostname' && mountPoint !== '/etc/hosts' && mountPoint !== '/etc/resolv.conf') continue;
    const id = /\/containers\/([0-9a-f]{64})\//.exec(root ?? '')?.[1];
    if (id) return id;
  }
  return null;
}

/** `make` runs once per key, its promise shared; a failure is forgotten, so a later call tries again. */
function once<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let pending = cache.get(key);
  if (!pending) {
    pending = make();
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}

export class DockerRuntime implements AgentRuntime {
  /** Public for agents/storage.ts, which makes the groups' disk volumes. */
  readonly docker: Docker;
  private own: Promise<OwnContainer | null> | null = null;
  private readonly hostCpus = new Map<string, Promise<number>>();

  private chosen: Promise<Sandbox> | null = null;

  private readonly sandboxSetting: SandboxSetting;
  private readonly agentImage: string;

  /** `sandbox`: which OCI runtime agents get (agents/sandbox.ts), decided once, tried with `image`. */
  constructor(options: { socketPath?: string; sandbox?: SandboxSetting; image?: string } = {}) {
    this.docker = new Docker({ socketPath: options.socketPath ?? (process.env.DOCKER_HOST?.replace(/^unix:\/\//, '') || '/var/run/docker.sock') });
    this.sandboxSetting = options.sandbox ?? 'auto';
    this.agentImage = options.image ?? 'carapace-agent:latest';
  }

  /** The runtime agents run under (runsc or runc), and why. */
  sandbox(): Promise<Sandbox> {
    const chosen = (this.chosen ??= chooseSandbox(this.docker, this.sandboxSetting, () => this.probeRunsc()));
    chosen.then((s) => s.provisional && (this.chosen = null), () => (this.chosen = null));
    return chosen;
  }

  /**
   * The core's own container when it runs in one that the Docker API knows, else null:
   * then the engine shares our filesystem (the core on the host, or an engine started in
   * the same container, as in CI) and paths need no translation.
   */
  private self(): Promise<OwnContainer | null> {
    this.own ??= (async () => {
      if (!existsSync('/.dockerenv')) return null;
      const id = ownContainerId() ?? hostname();
      const info = await this.docker.getContainer(id).inspect().catch(() => null);
      if (!info) return null;
      const mounts = (info.Mounts ?? []).map((m) => ({ dest: m.Destination, source: m.Source })).sort((a, b) => b.dest.length - a.dest.length);
      return { info, mounts };
    })();
    return this.own;
  }

  /** The Compose project the core's own container belongs to; null outside Compose. */
  async composeProject(): Promise<string | null> {
    return (await this.self())?.info.Config.Labels?.['com.docker.compose.project'] ?? null;
  }

  /**
   * The image the core's own container runs (its id), or null outside a container: the
   * scheduled backup runs in a one-off container of exactly this image (backup/runner.ts).
   */
  async ownImage(): Promise<string | null> {
    return (await this.self())?.info.Image ?? null;
  }

  /**
   * The core may itself run in a container: bind sources must then be host paths.
   * Its own container's mounts (from the Docker API) say where each of its paths lives.
   * A path on none of them would silently bind an unrelated (or new, empty) host path,
   * so that is an error.
   */
  async hostPath(local: string): Promise<string> {
    const own = await this.self();
    if (!own) return local;
    for (const { dest, source } of own.mounts) {
      if (local === dest || local.startsWith(`${dest}/`)) return source + local.slice(dest.length);
    }
    throw new Error(`${local} is not on a volume shared with the Docker host, so it cannot be mounted into an agent container`);
  }

  /** A container that was created but could not start is removed, not left for orphan clean-up. */
  async start(spec: AgentSpec): Promise<string> {
    const container = await this.create(spec, false);
    try {
      await container.start();
    } catch (err) {
      await this.remove(container.id).catch(() => undefined);
      throw err;
    }
    return container.id;
  }

  async startAttached(spec: AgentSpec): Promise<AttachedAgent> {
    const container = await this.create(spec, true);
    let agent: AgentProcess | null = null;
    try {
      // Before start: nothing the process writes can be missed, and the first message
      // can be written at once (it waits in the pipe until Claude Code reads it).
      agent = this.processOn(await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true }));
      await container.start();
      return { id: container.id, process: agent };
    } catch (err) {
      agent?.close();
      await this.remove(container.id).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The hardened container. `attached`: its main process talks to the core over stdin and
   * stdout, so stdin stays open, and the log driver is "none": that output is the
   * conversation, which must not also land in the engine's log files on the host.
   */
  private async create(spec: AgentSpec, attached: boolean): Promise<Docker.Container> {
    const { nanoCpus } = spec.limits;
    const sandbox = await this.sandbox();
    // runsc cannot change a running sandbox's limits (it has no `update`): its agents start
    // at their limit, without the start-up allowance.
    const startNanoCpus = sandbox.runtime === 'runsc' ? undefined : spec.limits.startNanoCpus;
    const [binds, cpus] = await Promise.all([
      Promise.all(spec.mounts.map(async (m) => (m.volume ? `${m.source}:${m.target}:${m.readOnly ? 'ro' : 'rw'},nocopy` : `${await this.hostPath(m.source)}:${m.target}:${m.readOnly ? 'ro' : 'rw'}`))),
      // The engine refuses a limit above the host's CPU count.
      startNanoCpus === undefined ? nanoCpus : this.hostNanoCpus().then((host) => Math.max(nanoCpus, Math.min(startNanoCpus, host))),
    ]);
    return this.docker.createContainer({
      name: spec.name,
      Image: spec.image,
      Cmd: spec.cmd,
      Env: spec.env,
      User: '1000:1000',
      WorkingDir: '/workspace/group',
      Labels: { [LABELS.managed]: 'true', [LABELS.instance]: spec.instance, [LABELS.group]: spec.group, [LABELS.session]: spec.session },
      NetworkDisabled: spec.network === 'none',
      ...(attached ? { OpenStdin: true, StdinOnce: false, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false } : {}),
      HostConfig: {
        Binds: binds,
        NetworkMode: spec.network,
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        PidsLimit: spec.limits.pids,
        Memory: spec.limits.memoryBytes,
        MemorySwap: spec.limits.memoryBytes,
        NanoCpus: cpus,
        Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=256m', '/home/node/.claude': `rw,nosuid,nodev,size=${spec.limits.stateMb}m,uid=1000,gid=1000,mode=0700` },
        Init: true,
        AutoRemove: false,
        Runtime: sandbox.runtime,
        ...(attached ? { LogConfig: { Type: 'none', Config: {} } } : {}),
      },
    });
  }

  /** What agents need of runsc, tried in a throwaway container (see SandboxProbe). */
  private async probeRunsc(): Promise<string | null> {
    const present = await this.docker.getImage(this.agentImage).inspect().then(() => true, () => false);
    if (!present) return null; // nothing to try with; the doctor reports the missing image
    const container = await this.docker.createContainer({
      Image: this.agentImage,
      Entrypoint: ['sh', '-c', 'stat / >/dev/null && ls / >/dev/null'],
      User: '1000:1000',
      NetworkDisabled: true,
      HostConfig: { Runtime: 'runsc', NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], LogConfig: { Type: 'none', Config: {} } },
    });
    try {
      await container.start();
      const result = (await Promise.race([container.wait(), new Promise((resolve) => setTimeout(() => resolve({ StatusCode: -1 }), 30_000).unref())])) as { StatusCode: number };
      return result.StatusCode === 0 ? null : `\`stat /\` failed in a runsc container (exit ${result.StatusCode})`;
    } catch (err) {
      return `a runsc container would not start: ${(err as Error).message}`;
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  /** The host's CPU count (from the engine, once), in the unit of NanoCpus. */
  private hostNanoCpus(): Promise<number> {
    return once(this.hostCpus, 'NCPU', () => this.docker.info().then((info: { NCPU?: number }) => (info.NCPU ?? 1) * 1e9));
  }

  async limitCpus(id: string, nanoCpus: number): Promise<void> {
    if ((await this.sandbox()).runtime === 'runsc') return; // started at its limit (see create)
    await this.docker.getContainer(id).update({ NanoCpus: nanoCpus });
  }

  /**
   * AgentRuntime.changedFiles: `find` in the container, as the agent's user, before its
   * agent has had a turn (so nothing of it runs yet). The one exec the core makes, and only
   * for a group whose workspace a labelled session may have written.
   */
  async changedFiles(id: string, since: string): Promise<ChangedFiles> {
    const r = await this.exec(id, changedFilesCommand(since), CHANGED_FILES_MS).catch(() => null);
    if (!r || r.timedOut || r.exitCode === null) return null;
    const files = r.stdout.split('\0').filter((f) => f.length > 0);
    // A folder it could not read, output past the bound: incomplete (the session counts as labelled).
    return { files, complete: r.exitCode === 0 && r.stdout.length < MAX_OUTPUT };
  }

  /** Tests look inside containers with it (the core itself only through changedFiles). */
  async exec(id: string, cmd: string[], timeoutMs: number): Promise<ExecResult> {
    const container = this.docker.getContainer(id);
    const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: '1000:1000', WorkingDir: '/workspace/group' });
    const stream = await exec.start({ hijack: true, stdin: false });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    const keep = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_OUTPUT) into.push(chunk);
    };
    stdout.on('data', keep(out));
    stderr.on('data', keep(err));
    this.docker.modem.demuxStream(stream, stdout, stderr);
    const finished = new Promise<boolean>((resolve) => {
      stream.on('end', () => resolve(false));
      stream.on('close', () => resolve(false));
      stream.on('error', () => resolve(false));
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([finished, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs)))]);
    clearTimeout(timer);
    if (timedOut) {
      stream.destroy();
      return { exitCode: null, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), timedOut: true };
    }
    const info = await exec.inspect();
    return { exitCode: info.ExitCode ?? null, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), timedOut: false };
  }

  /** Lines in on stdin, lines out on stdout, over a hijacked attach stream. */
  private processOn(stream: NodeJS.ReadWriteStream): AgentProcess {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    // Diagnostics only: keep a short tail, never let it back up the process.
    let tail = '';
    stderr.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString('utf8')).slice(-4096)));
    this.docker.modem.demuxStream(stream, stdout, stderr);
    const lines = createInterface({ input: stdout });
    let exited = false;
    const exitListeners: (() => void)[] = [];
    const exit = (): void => {
      if (exited) return;
      exited = true;
      for (const listener of exitListeners) listener();
    };
    stream.on('end', exit);
    stream.on('close', exit);
    stream.on('error', exit);
    return {
      send: (line) => void stream.write(`${line}\n`),
      onLine: (listener) => void lines.on('line', listener),
      onExit: (listener) => (exited ? listener() : void exitListeners.push(listener)),
      stderrTail: () => tail,
      close: () => (stream as NodeJS.ReadWriteStream & { destroy(): void }).destroy(),
    };
  }

  /** A regular file of the agent's workspace, no link on its way, read from a container that holds only the workspace (agent-file-reader.ts). */
  readFile(id: string, path: string, maxBytes: number): Promise<FileRead> {
    return readAgentFile(this.docker, id, path, maxBytes);
  }

  async isRunning(id: string): Promise<boolean> {
    const info = await this.docker.getContainer(id).inspect().catch(() => null);
    return info?.State.Running === true;
  }

  async remove(id: string): Promise<void> {
    await this.docker.getContainer(id).remove({ force: true, v: true }).catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw err;
    });
  }

  async listManaged(instance: string): Promise<string[]> {
    const list = await this.docker.listContainers({ all: true, filters: { label: [`${LABELS.managed}=true`, `${LABELS.instance}=${instance}`] } });
    return list.map((c) => c.Id);
  }

  inspect(id: string): Promise<Docker.ContainerInspectInfo> {
    return this.docker.getContainer(id).inspect();
  }
}
