// What the agent manager needs from a container runtime. Docker (dockerode) is the
// runtime; the interface keeps the manager testable and the runtime swappable.
import type { ChangedFiles } from './workspace-labels.js';

export interface MountSpec {
  /** Path as the core sees it; the runtime maps it to a host path if the core is containerized. */
  source: string;
  target: string;
  readOnly: boolean;
  /** `source` is a Docker volume's name (a quota-held file system, agents/storage.ts), not a path. */
  volume?: boolean;
}

export interface AgentSpec {
  name: string;
  image: string;
  /** Which core owns the container: orphan clean-up touches only its own. */
  instance: string;
  group: string;
  session: string;
  env: string[];
  mounts: MountSpec[];
  /**
   * Always "none", in both modes: an agent reaches only the unix sockets in its session
   * directory (DESIGN.md decision 9). A type, so that nothing can ask for more.
   */
  network: 'none';
  cmd: string[];
  limits: {
    memoryBytes: number;
    nanoCpus: number;
    pids: number;
    /** The size of the tmpfs at /home/node/.claude (Claude Code's state for this container only). */
    stateMb: number;
    /**
     * A higher CPU limit to start with (capped at the host's CPUs), until the core lowers
     * it to `nanoCpus` with limitCpus().
     */
    startNanoCpus?: number;
  };
}

/** A long-lived process in an agent container: lines in on stdin, lines out on stdout. */
export interface AgentProcess {
  send(line: string): void;
  onLine(listener: (line: string) => void): void;
  /** Called once when the process's output ends (it exited or the container stopped). */
  onExit(listener: () => void): void;
  /** The last few KB the process wrote on stderr, for the audit log. */
  stderrTail(): string;
  close(): void;
}

/** A container whose main process the core talks to over its own stdin and stdout. */
export interface AttachedAgent {
  id: string;
  process: AgentProcess;
}

export interface AgentRuntime {
  start(spec: AgentSpec): Promise<string>;
  /**
   * Legacy mode: starts a container whose main process is the agent itself (`spec.cmd`),
   * attached to its stdin and stdout before it starts. A `docker exec` costs ~55 ms on
   * this engine before the process even runs; this way the agent starts with the
   * container and nothing it writes is missed.
   */
  startAttached(spec: AgentSpec): Promise<AttachedAgent>;
  /** Sets a running container's CPU limit. */
  limitCpus(id: string, nanoCpus: number): Promise<void>;
  /** False once the container has stopped (or is gone). */
  isRunning(id: string): Promise<boolean>;
  remove(id: string): Promise<void>;
  /** Containers of this instance (by label), including ones left by an earlier run. */
  listManaged(instance: string): Promise<string[]>;
  /**
   * The workspace files and links a container sees changed (ctime) since `since`, looked at
   * before its agent's first turn (workspace-labels.ts); null when it could not look.
   */
  changedFiles?(id: string, since: string): Promise<ChangedFiles>;
}

export const LABELS = { managed: 'carapace.managed', instance: 'carapace.instance', group: 'carapace.group', session: 'carapace.session' } as const;
