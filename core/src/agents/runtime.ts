// What the agent manager needs from a container runtime. Docker (dockerode) is the
// runtime; the interface keeps the manager testable and the runtime swappable.
export interface MountSpec {
  /** Path as the core sees it; the runtime maps it to a host path if the core is containerized. */
  source: string;
  target: string;
  readOnly: boolean;
}

export interface AgentSpec {
  name: string;
  image: string;
  group: string;
  session: string;
  env: string[];
  mounts: MountSpec[];
  /** "none" in legacy mode; a named network in API mode. */
  network: string;
  cmd: string[];
  limits: { memoryBytes: number; nanoCpus: number; pids: number };
}

export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface AgentRuntime {
  start(spec: AgentSpec): Promise<string>;
  exec(id: string, cmd: string[], timeoutMs: number): Promise<ExecResult>;
  remove(id: string): Promise<void>;
  /** Containers this core created (by label), including ones left by an earlier run. */
  listManaged(): Promise<{ id: string; group: string | null }[]>;
}

export const LABELS = { managed: 'carapace.managed', group: 'carapace.group', session: 'carapace.session' } as const;
