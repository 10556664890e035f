// Starting one group's agent and taking it down again: its session (socket), its LLM proxy
// endpoint, the read-only overlays (CLAUDE.md with the memory brief, skills, settings), its
// workspace mount and the hardened container in either mode, and whether what it is handed
// holds external content (DESIGN 16). The agent manager (agent-manager.ts) decides when.
//
// Two modes, same mounts, hardening, queue and timeouts:
// - legacy: --network none; Claude Code is the container's main process, attached
//   (stream-json on its stdin/stdout), reaching the LLM proxy socket directly.
// - api: --network none too; the container serves agent-image/api-server.mjs on a unix
//   socket in a per-container directory the core bind-mounts at /run/api, and each turn
//   is an authenticated POST /v1/run over it. The bearer token reaches the container only
//   as a one-time file in that same directory.
// In both, the agent reaches only the sockets the core mounts for it (DESIGN.md decision 9):
// its session directory's, and in API mode its own server's; the model only through the
// core's per-session LLM proxy.
import { randomUUID } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentSettings } from '../config.js';
import type { Core } from '../core.js';
import type { Brief } from '../conversation/earlier-conversation.js';
import type { LlmProxy } from '../llm/llm-proxy.js';
import type { RunningTurn } from './turn-notices.js';
import { ApiClient } from './api-client.js';
import { CLAUDE_COMMAND, ClaudeSession, type TurnRunner } from './claude-session.js';
import { renderInstructions } from './memory-brief.js';
import type { AgentRuntime, MountSpec } from './runtime.js';
import { writeSkills } from './skills.js';
import { StartupCpus } from './startup-cpus.js';
import { NoDiskSpace, type GroupStorage } from './storage.js';
import type { WorkspaceLabels } from './workspace-labels.js';

const AGENT_UID = 1000;
/** The session's LLM proxy socket, as the container sees it (the session directory is mounted at /run/carapace). */
const LLM_SOCKET = '/run/carapace/llm.sock';
/**
 * API mode: the server's unix socket, in the container's /run/api directory: the agent's
 * own (it must create the socket there), unlike the session directory, which the core
 * owns. The core finds it at `<apiDir>/api.sock`.
 */
const API_SOCKET_NAME = 'api.sock';
const API_SOCKET = `/run/api/${API_SOCKET_NAME}`;
/** API mode: how long a new container's server may take to answer GET /health. */
const API_HEALTH_DEADLINE_MS = 30_000;

export interface AgentPaths {
  /** Group workspaces, mounted read-write at /workspace/group. */
  groupsDir: string;
  /** Per-session folders: Claude Code's state (read-write) and the read-only overlays. */
  stateDir: string;
  /** agent-image/: settings.json and the CLAUDE.md template. */
  agentImageDir: string;
  /** Names this core's containers (label carapace.instance). */
  instance: string;
  /**
   * API mode: where the one-time bearer-token directories are made
   * (`<dir>/carapace-api-<uuid>/.api-key`). main.ts passes $CARAPACE_API_KEY_DIR; unset,
   * the OS temp dir ($TMPDIR). A containerized core needs a directory on a volume shared
   * with the Docker host (ideally tmpfs, mounted in the core only).
   */
  apiKeyDir?: string;
}

export interface Agent {
  session: string;
  container: string;
  privateDir: string;
  /** API mode: the host directory mounted at /run/api (the server's socket; the token file is gone by now). */
  apiDir: string | null;
  runner: TurnRunner;
  idle: NodeJS.Timeout | null;
  /** Legacy mode, until the first turn ends: the start-up CPU allowance still to be lowered. */
  cpus: StartupCpus | null;
  /** Watchdog disk quota: stops looking at the group's usage. */
  unwatch?: () => void;
  /** Why the core ended it (stopped by a person, the model refused the key): its turn ends with this. */
  ended?: string;
  /** A person cleared the conversation during a turn: the agent goes when the turn ends. */
  retireAfterTurn?: boolean;
  /** Kernel-counted errors of its workspace file system when it started (storage.fsErrors). */
  fsErrors?: number;
  /** The turn running now: its events, whether a reply of it reached the person yet, and its replies that failed (turn-notices.ts). */
  turn?: RunningTurn;
}

export class AgentLauncher {
  constructor(
    private readonly core: Core,
    private readonly runtime: AgentRuntime,
    private readonly llm: LlmProxy,
    private readonly settings: AgentSettings,
    private readonly paths: AgentPaths,
    private readonly storage: GroupStorage,
    private readonly workspaceLabels: WorkspaceLabels,
  ) {}

  /**
   * Starts the group's agent: its session, LLM endpoint, overlays and container, labelled
   * from its start where what it is handed holds external content. A session the core
   * quarantined meanwhile (`quarantined`) is not handed over. When it cannot start, what
   * was made is removed, the failure said and audited, and the error thrown.
   */
  async launch(group: string, trigger: Record<string, string>, quarantined: ReadonlySet<string>): Promise<Agent> {
    const session = await this.core.openSession(group);
    const sessionDir = join(session.socketPath, '..');
    const privateDir = join(this.paths.stateDir, 'sessions', session.id);
    const api = this.settings.mode === 'api';
    let container: string | null = null;
    let apiDir: string | null = null;
    try {
      const nanoCpus = Math.round(this.settings.cpus * 1e9);
      const cpus = api ? null : new StartupCpus(this.runtime, nanoCpus);
      const llm = await this.llm.open(session.id, group, join(sessionDir, 'llm.sock'), cpus ? { beforeFirstAnswer: () => cpus.settle() } : {});
      const writable = await this.storage.mounts(group);
      mkdirSync(privateDir, { recursive: true });
      const claudeMd = join(privateDir, 'CLAUDE.md');
      const instructions = await this.instructions(group);
      // Memories written after reading external content are in its context from the start.
      if (instructions.labelled) this.core.sessions.markUntrustedInput(session.id);
      writeFileSync(claudeMd, instructions.text);
      const skills = join(privateDir, 'skills');
      writeSkills(skills, this.core.catalog);
      const mounts: MountSpec[] = [
        // Read-only: the agent only connects to the sockets there (connect(2) needs no
        // writable mount); the folder is on the host's socket tmpfs, never agent storage.
        { source: sessionDir, target: '/run/carapace', readOnly: true },
        ...writable,
        { source: join(this.paths.agentImageDir, 'settings.json'), target: '/home/node/.claude/settings.json', readOnly: true },
        { source: claudeMd, target: '/home/node/.claude/CLAUDE.md', readOnly: true },
        { source: skills, target: '/home/node/.claude/skills', readOnly: true },
      ];
      const spec = {
        name: `carapace-${this.paths.instance}-${group}-${session.id.slice(-6)}`,
        image: this.settings.image,
        instance: this.paths.instance,
        group,
        session: session.id,
        // Claude Code's state (~/.claude) is a tmpfs that lives and dies with the session:
        // nothing an agent writes there (commands, agents, rules, plugins, auto memory,
        // .claude.json...) is ever read by a later session. Conversations are per container.
        limits: { memoryBytes: this.settings.memory_mb * 1024 * 1024, nanoCpus, pids: this.settings.pids, stateMb: this.settings.state_quota_mb, ...(cpus ? { startNanoCpus: cpus.startNanoCpus } : {}) },
      };
      // The image sets DISABLE_AUTOUPDATER and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC.
      const common = [`ANTHROPIC_API_KEY=${llm.token}`];
      let runner: TurnRunner;
      if (api) {
        const token = randomUUID();
        apiDir = this.writeApiKey(token);
        container = await this.runtime.start({
          ...spec,
          // The directory, not the file: the entrypoint must be able to delete the file.
          mounts: [...mounts, { source: apiDir, target: '/run/api', readOnly: false }],
          network: 'none',
          cmd: ['api'],
          // Claude Code reaches the LLM proxy socket itself, as in legacy mode.
          env: ['ANTHROPIC_BASE_URL=http://localhost', `ANTHROPIC_UNIX_SOCKET=${LLM_SOCKET}`, `CARAPACE_API_SOCKET=${API_SOCKET}`, ...common],
        });
        this.core.sessions.setContainer(session.id, container);
        // The server starts Claude Code at once: the first turn finds it ready.
        runner = await this.connect(container, join(apiDir, API_SOCKET_NAME), token, apiDir);
      } else {
        // Claude Code is the container's main process and starts with it; the first
        // message waits on its stdin. It speaks plain HTTP (the base URL's scheme) straight
        // to the session's LLM proxy socket: no forwarder process, no TCP hop.
        const started = await this.runtime.startAttached({
          ...spec,
          mounts,
          network: 'none',
          cmd: CLAUDE_COMMAND,
          env: ['ANTHROPIC_BASE_URL=http://localhost', `ANTHROPIC_UNIX_SOCKET=${LLM_SOCKET}`, ...common],
        });
        container = started.id;
        cpus?.started(container);
        this.core.sessions.setContainer(session.id, container);
        runner = new ClaudeSession(started.process);
      }
      const agent: Agent = { session: session.id, container, privateDir, apiDir, runner, idle: null, cpus };
      // Quarantined while it started (the event found no agent to retire yet).
      if (quarantined.has(session.id)) {
        runner.close();
        throw new Error('session quarantined while the agent started');
      }
      agent.fsErrors = (await this.storage.fsErrors?.(group)) ?? 0;
      // Off the start's critical path: its requests wait for it instead (the model answers first).
      this.core.sessions.holdRequestsFor(session.id, this.checkWorkspaceLabel(group, session.id, container));
      return agent;
    } catch (err) {
      await this.teardown({ session: session.id, container, apiDir, privateDir });
      const noSpace = err instanceof NoDiskSpace;
      if (!quarantined.has(session.id)) this.core.publish('agent.error', group, { session: session.id, reason: noSpace ? err.message : 'the agent could not be started', ...trigger });
      this.core.audit.record({ group, session: session.id, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', ...(noSpace ? { severity: 'CRITICAL' as const, code: err.code } : {}), reason: noSpace ? err.message : 'agent container failed to start', detail: String((err as Error)?.message ?? err) });
      throw err;
    }
  }

  /**
   * API mode: `<base>/carapace-api-<uuid>/.api-key`, mode 0600, owned by the agent's uid
   * so its entrypoint can read it and delete it. The directory's name is a fresh UUID,
   * not the token: the mount source shows in `docker inspect`.
   */
  private writeApiKey(token: string): string {
    const base = this.paths.apiKeyDir || tmpdir();
    const uid = process.getuid?.();
    if (uid !== undefined && uid !== 0 && uid !== AGENT_UID) {
      throw new Error(`API mode: the core runs as uid ${uid}; only root or uid ${AGENT_UID} can hand the agent (uid ${AGENT_UID}) a token file that is readable by it alone`);
    }
    const dir = join(base, `carapace-api-${randomUUID()}`);
    mkdirSync(dir, { mode: 0o700 });
    try {
      const file = join(dir, '.api-key');
      writeFileSync(file, token, { mode: 0o600, flag: 'wx' });
      if (uid === 0) {
        chownSync(file, AGENT_UID, AGENT_UID);
        chownSync(dir, AGENT_UID, AGENT_UID);
      }
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    return dir;
  }

  /**
   * As the first turn starts: files a labelled session of the group may have written label
   * this one too (workspace-labels.ts). Only for such groups; a runtime that cannot look, or
   * a check that fails, labels it. The session's requests wait for it (SessionTable.holdRequestsFor).
   */
  private async checkWorkspaceLabel(group: string, session: string, container: string): Promise<void> {
    const since = this.workspaceLabels.since(group);
    if (since === null) return;
    const found = (await this.runtime.changedFiles?.(container, since)) ?? null;
    if (!this.workspaceLabels.checked(group, found)) return;
    this.core.sessions.markUntrustedInput(session);
    const label = this.workspaceLabels.get(group)!;
    const what = found ? `${found.files.length} file${found.files.length === 1 ? '' : 's'}${found.complete ? '' : ' at least'}` : 'files it could not list';
    this.core.audit.record({ group, session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'ok', reason: `the workspace holds ${what} changed since a session read external content (${label.since}): this session counts as having read it` });
  }

  /** API mode: wait until the container's server is healthy on its socket, check the token file is gone. */
  private async connect(container: string, socketPath: string, token: string, apiDir: string): Promise<ApiClient> {
    const client = new ApiClient(socketPath, token);
    await client.waitHealthy(API_HEALTH_DEADLINE_MS, () => this.runtime.isRunning(container));
    if (existsSync(join(apiDir, '.api-key'))) throw new Error('the agent did not delete its bearer-token file');
    return client;
  }

  private async instructions(group: string): Promise<Brief> {
    const template = readFileSync(join(this.paths.agentImageDir, 'CLAUDE.md'), 'utf8');
    return renderInstructions(template, group, await this.core.memoryBrief(group));
  }

  /** What a started (or half-started) agent holds, removed in this order. */
  async teardown(held: Pick<Agent, 'session' | 'privateDir' | 'apiDir'> & { container: string | null }): Promise<void> {
    if (held.container) await this.runtime.remove(held.container).catch(() => undefined);
    if (held.apiDir) rmSync(held.apiDir, { recursive: true, force: true });
    await this.llm.close(held.session);
    await this.core.closeSession(held.session);
    rmSync(held.privateDir, { recursive: true, force: true });
  }
}
