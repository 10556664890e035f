// Event-to-agent logic and the container lifecycle. Each group has at most one live
// agent container, handles its messages one at a time in order, keeps it warm until
// an idle timeout, and never shares it with another group.
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
import type { Core, Reply } from '../core.js';
import type { LlmProxy } from '../llm/llm-proxy.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import type { Brief } from '../conversation/earlier-conversation.js';
import { renderInstructions } from './memory-brief.js';
import { promptFor } from './prompt.js';
import { answersTurn } from './replies.js';
import { carriesUntrustedInput } from '../pipeline/untrusted-input.js';
import { ApiClient } from './api-client.js';
import { CLAUDE_COMMAND, ClaudeSession, type TurnRunner } from './claude-session.js';
import type { AgentRuntime, MountSpec } from './runtime.js';
import { writeSkills } from './skills.js';
import { StartupCpus } from './startup-cpus.js';
import { engineOf, groupStorage, NoDiskSpace, type GroupStorage } from './storage.js';
import { noAnswerNotice, previewOf, type UnfinishedTurns } from './unfinished-turns.js';
import { WorkspaceLabels } from './workspace-labels.js';
import { batchPrompt, TurnQueue, type QueuedTurn } from './turn-queue.js';
import type { AgentCounts } from '../metrics/metrics.js';
import { AgentStates } from './agent-states.js';

const AGENT_UID = 1000;
/** What an idle agent is asked before it goes (`last_turn_ms`). */
const LAST_TURN_PROMPT = [
  'Carapace: this session ends now, because the conversation has been idle.',
  'If the person told you something in it worth remembering in later sessions (a preference, a fact, a decision) that your memory does not hold yet, store it now with memory_store (see your memory skill).',
  'Do not message the person and do nothing else. If there is nothing to store, answer "nothing to store".',
].join('\n');
/** How often live agents' workspace file systems are looked at for kernel-counted errors. */
const FS_CHECK_MS = 5_000;
/** Messages that waited while a turn ran share the next one, up to this many. */
const MAX_BATCH = 20;
/** Turns waiting per group at most; more are refused (and the person told once). */
const MAX_WAITING = 200;
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

interface Agent {
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
  /** The turn running now: its events (several messages may share a turn), and whether a reply of it reached the person yet. */
  turn?: { causes: EventEnvelope[]; replied: boolean };
}

/** What a new session's first prompt starts with: the group's earlier conversation (conversation/). */
export interface EarlierConversation {
  brief(group: string, cause: string | null): Brief;
}

export interface RunOutcome {
  ok: boolean;
  output: string;
}

export class AgentManager {
  private readonly agents = new Map<string, Agent>();
  private readonly turns = new TurnQueue({
    maxBatch: MAX_BATCH,
    maxWaiting: MAX_WAITING,
    run: (group, batch) => this.runBatch(group, batch),
    overflowed: (group, turn, waiting) => this.tellOverflow(group, turn, waiting),
  });
  /** Sessions the core quarantined: their agent is retired, and says nothing more to the user. */
  private readonly quarantined = new Set<string>();
  private stopped = false;
  /** An earlier run's agents being removed (removeOrphans). */
  private swept: Promise<unknown> = Promise.resolve();
  private starting = 0;
  private fsCheck: NodeJS.Timeout | null = null;
  /** Each group's agent state, for the console. */
  readonly states = new AgentStates();
  /** Groups whose agent is starting, with the Stop that came meanwhile (ended once started). */
  private readonly spawning = new Map<string, { reason: string; by: string } | null>();

  constructor(
    private readonly core: Core,
    private readonly runtime: AgentRuntime,
    private readonly llm: LlmProxy,
    private readonly settings: AgentSettings,
    private readonly paths: AgentPaths,
    private readonly knownGroups: () => string[],
    /** The workspace mount, held to the disk quota (agents/storage.ts). */
    readonly storage: GroupStorage = groupStorage(settings, paths, engineOf(runtime)),
    /** Accepted events no turn has finished yet: what a crash would otherwise drop silently. */
    private readonly unfinished: UnfinishedTurns | null = null,
    /** The group's earlier conversation, for a new session's first prompt. */
    private readonly earlier: EarlierConversation | null = null,
    /** Groups whose workspace a labelled session may have written (in memory unless main.ts gives a file). */
    readonly workspaceLabels = new WorkspaceLabels(null),
  ) {
    core.sessions.onLabelled((session) => workspaceLabels.labelled(session.group));
    core.on('quarantined', ({ session, group }) => this.onQuarantined(session, group));
    core.on('replied', (reply) => this.onReplied(reply));
    if (storage.fsErrors) {
      this.fsCheck = setInterval(() => void this.checkFileSystems(), FS_CHECK_MS);
      this.fsCheck.unref();
    }
  }

  /** A reply tool delivered what the agent wrote to the turn's person: the turn has answered (and a crash now must not say otherwise). */
  private onReplied(reply: Reply): void {
    const { session, group } = reply;
    const turn = this.agents.get(group)?.session === session ? this.agents.get(group)?.turn : undefined;
    if (!turn || turn.replied || !answersTurn(reply, turn.causes)) return;
    turn.replied = true;
    for (const cause of turn.causes) this.unfinished?.replied(cause.id);
  }

  /**
   * The core has closed an abusive session's socket (and told the user, once): its
   * container goes now. The group's next message starts a fresh agent.
   */
  private onQuarantined(session: string, group: string): void {
    this.quarantined.add(session);
    const agent = this.agents.get(group);
    if (agent?.session === session) void this.retire(group);
  }

  /**
   * Removes containers left by an earlier core: their socket mounts point at nothing now.
   * Turns wait for it (a sweep after a new agent started would remove it); messages are taken meanwhile.
   */
  removeOrphans(): Promise<number> {
    const swept = (async () => {
      const orphans = await this.runtime.listManaged(this.paths.instance);
      await Promise.all(orphans.map((id) => this.runtime.remove(id)));
      return orphans.length;
    })();
    this.swept = swept.catch(() => 0);
    return swept;
  }

  /** message.inbound and task.triggered for a known group start (or reuse) its agent. */
  onEvent(event: EventEnvelope): Promise<RunOutcome> | null {
    const audit = (reason: string) =>
      this.core.audit.record({ group: event.group, session: null, source: event.source, topic: event.topic, correlation: null, stage: 'agent', outcome: 'dropped', reason });
    if (event.topic !== 'message.inbound' && event.topic !== 'task.triggered') return null;
    if (event.group === null || !this.knownGroups().includes(event.group)) {
      audit('no agent for an unknown group');
      return null;
    }
    const prompt = promptFor(event);
    if (prompt === null) {
      audit('event carries no prompt');
      return null;
    }
    this.unfinished?.accept(event);
    return this.enqueue(event.group, prompt, event);
  }

  /** Runs a group's prompts one turn at a time, in order; messages waiting meanwhile share the next turn (turn-queue.ts). */
  async enqueue(group: string, prompt: string, cause?: EventEnvelope): Promise<RunOutcome> {
    await this.swept;
    const outcome = await this.turns.enqueue(group, { prompt, ...(cause ? { cause } : {}) });
    if (outcome.dropped && cause) this.unfinished?.finish(cause.id); // the person was told
    return outcome;
  }

  /** The group's model budget is spent for `ms`: its messages wait for it to renew rather than fail one by one. */
  holdFor(group: string, ms: number): void {
    this.turns.holdUntil(group, Date.now() + ms);
  }

  private runBatch(group: string, batch: QueuedTurn[]): Promise<RunOutcome> {
    if (batch[0].last) return this.runLast(group, batch[0].last);
    const causes = batch.flatMap((t) => (t.cause ? [t.cause] : []));
    return this.settled(this.run(group, batchPrompt(batch.map((t) => t.prompt)), causes), causes);
  }

  private tellOverflow(group: string, turn: QueuedTurn, waiting: number): void {
    this.core.audit.record({ group, session: null, source: 'core', topic: turn.cause?.topic ?? null, correlation: null, stage: 'agent', outcome: 'dropped', reason: `${waiting} turns already waiting: messages are not handled until the agent catches up; user told` });
    const what = turn.cause ? ` ("${previewOf(turn.cause)}" and any more)` : '';
    this.core.publish('user.notify', group, { text: `Carapace: ${waiting} messages are already waiting for the agent, so newer ones${what} are not handled until it catches up. Send them again later.` });
  }

  /**
   * A turn's events are finished once the person saw its reply or an error notice. While
   * the core is stopping, a turn that did not complete is left for the next start to report
   * (its error notice would reach no channel now).
   */
  private async settled(run: Promise<RunOutcome>, causes: EventEnvelope[]): Promise<RunOutcome> {
    let ok = false;
    try {
      const outcome = await run;
      ok = outcome.ok;
      return outcome;
    } finally {
      if (ok || !this.stopped) for (const cause of causes) this.unfinished?.finish(cause.id);
    }
  }

  private async run(group: string, prompt: string, causes: EventEnvelope[]): Promise<RunOutcome> {
    if (this.stopped) return { ok: false, output: 'stopping' };
    // Who asked: lets a scheduler count its task's failures, a failed spawn included (a task has a turn of its own).
    const cause = causes[0];
    const trigger = cause ? { topic: cause.topic, event_id: cause.id, ...(typeof cause.payload.task_id === 'string' ? { task_id: cause.payload.task_id } : {}) } : {};
    let agent = this.agents.get(group);
    if (!agent) {
      this.states.set(group, 'starting', { container: null, session: null });
      this.spawning.set(group, null);
      agent = await this.spawn(group, trigger).catch((err: unknown) => {
        this.spawning.delete(group);
        this.states.set(group, 'failed', { container: null, session: null });
        throw err;
      });
      const stop = this.spawning.get(group);
      this.spawning.delete(group);
      if (stop) {
        // Stopped while it started: the turn ends before it begins.
        await this.end(group, stop.reason, stop.by);
        this.core.publish('agent.error', group, { session: agent.session, reason: stop.reason, ...trigger });
        return { ok: false, output: stop.reason };
      }
      // A new session: it hears the earlier conversation first, as data (conversation/);
      // external text in it labels the session from its first turn.
      const earlier = this.earlier?.brief(group, cause?.id ?? null);
      if (earlier?.labelled) this.core.sessions.markUntrustedInput(agent.session);
      prompt = (earlier?.text ?? '') + prompt;
    }
    if (agent.idle) clearTimeout(agent.idle);
    this.states.set(group, 'working', agent);
    // The core, not the agent, knows a turn is a scheduled task's: what it asks may be unattended.
    if (cause?.topic === 'task.triggered') this.core.sessions.markTaskStarted(agent.session);
    // A mail's words are not the person's: what they could ask for needs the person's yes.
    if (causes.some(carriesUntrustedInput)) this.core.sessions.markUntrustedInput(agent.session);
    const turn = (agent.turn = { causes, replied: false });
    const result = await agent.runner.turn(prompt, this.settings.run_timeout_ms).finally(() => {
      if (agent.turn === turn) agent.turn = undefined;
    });
    if (this.quarantined.has(agent.session)) {
      // Its container was stopped under it; the user has had the one notice already.
      await this.retire(group);
      return { ok: false, output: 'session quarantined' };
    }
    if (agent.ended !== undefined) {
      this.core.publish('agent.error', group, { session: agent.session, reason: agent.ended, ...trigger });
      return { ok: false, output: agent.ended };
    }
    if (agent.cpus) {
      // Normally lowered before the first model answer; a turn can also end without one.
      // If it fails the container is gone, and the next turn finds the agent exited.
      const cpus = agent.cpus;
      agent.cpus = null;
      await cpus.settle().catch(() => undefined);
    }
    if (result.status === 'timeout' || result.status === 'exited') {
      const reason = result.status === 'timeout' ? 'timeout' : 'agent process exited';
      this.core.publish('agent.error', group, { session: agent.session, reason, limit_ms: this.settings.run_timeout_ms, ...trigger });
      this.core.audit.record({ group, session: agent.session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: result.status === 'timeout' ? `agent run exceeded ${this.settings.run_timeout_ms} ms; container killed` : 'agent process exited; container removed', detail: result.output.slice(-2000) || undefined });
      await this.retire(group);
      return { ok: false, output: result.output };
    }
    const ok = result.status === 'ok';
    // A person's message that got no answer at all (the model gave up after a refused send,
    // say): they hear that the turn ended, rather than nothing.
    const lastMessage = causes.filter((c) => c.topic === 'message.inbound').at(-1);
    if (ok && !turn.replied && lastMessage) this.tellNoAnswer(group, agent.session, lastMessage);
    this.states.set(group, 'idle', agent, true);
    this.core.publish(ok ? 'agent.completed' : 'agent.error', group, { session: agent.session, ...(ok ? {} : { reason: 'the agent reported an error' }), ...trigger });
    this.core.audit.record({ group, session: agent.session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: ok ? 'ok' : 'error', reason: ok ? 'agent run completed' : 'agent run failed', detail: ok ? undefined : result.output.slice(-2000) });
    if (agent.retireAfterTurn) await this.retire(group);
    else {
      agent.idle = setTimeout(() => void this.idleEnd(group, agent), this.settings.idle_timeout_ms);
      agent.idle.unref();
    }
    return { ok, output: result.output };
  }

  /**
   * The idle timeout: the agent goes. Where memory serves the group, it first gets one
   * bounded last turn to store what it learned (the memory specification's session-end
   * sweep: nothing else tells an agent its session ends), queued like any turn.
   */
  private async idleEnd(group: string, agent: Agent): Promise<void> {
    if (this.agents.get(group) !== agent) return;
    if (this.settings.last_turn_ms === 0 || !this.core.toolsOf(group).includes('memory_store')) return this.retire(group);
    await this.turns.enqueue(group, { prompt: LAST_TURN_PROMPT, last: agent.session });
  }

  private async runLast(group: string, session: string): Promise<RunOutcome> {
    const agent = this.agents.get(group);
    if (!agent || agent.session !== session || this.stopped) return { ok: false, output: 'no such session' };
    if (agent.idle) clearTimeout(agent.idle);
    this.states.set(group, 'working', agent);
    const started = Date.now();
    const result = await agent.runner.turn(LAST_TURN_PROMPT, this.settings.last_turn_ms);
    const ok = result.status === 'ok';
    this.core.audit.record({ group, session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: ok ? 'ok' : 'error', reason: `last turn before the idle session ends: ${result.status} after ${Date.now() - started} ms`, detail: ok ? undefined : result.output.slice(-2000) });
    await this.retire(group);
    return { ok, output: result.output };
  }

  private tellNoAnswer(group: string, session: string, cause: EventEnvelope): void {
    this.core.audit.record({ group, session, source: 'core', topic: cause.topic, correlation: null, stage: 'agent', outcome: 'error', reason: 'agent turn ended without a reply reaching the person; user told' });
    this.core.publish('user.notify', group, { text: noAnswerNotice(previewOf(cause)) });
  }

  /** Ends the group's agent once its turn running now is over (a person cleared the conversation): the next message starts afresh. */
  async forget(group: string): Promise<void> {
    const agent = this.agents.get(group);
    if (agent?.turn) agent.retireAfterTurn = true;
    else await this.retire(group);
  }

  /**
   * A workspace whose file system the kernel counted new errors on (an I/O error, a failing
   * host disk; mounted errors=remount-ro, it takes no more writes): the agent is stopped
   * before it reports more work as done, the person told once, CRITICAL in the audit.
   */
  private async checkFileSystems(): Promise<void> {
    for (const [group, agent] of [...this.agents]) {
      const errors = (await this.storage.fsErrors?.(group)) ?? 0;
      if (errors <= (agent.fsErrors ?? 0) || this.agents.get(group) !== agent) continue;
      agent.fsErrors = errors;
      this.core.audit.record({ group, session: agent.session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', severity: 'CRITICAL', code: 'WORKSPACE_FS_ERROR', reason: `the workspace file system of group "${group}" counted ${errors} error(s) (an I/O error, or the host disk under it failed): it takes no more writes; the agent is stopped` });
      this.core.publish('user.notify', group, { text: 'Carapace: the storage of this group\'s files reported an error, so its agent was stopped before it could report more work as done. Files written recently may be lost. The operator should check the host\'s disk.' });
      await this.end(group, 'its workspace file system reported an error', 'core');
    }
  }

  /** Agent containers running, and being started now (for /metrics). */
  counts(): AgentCounts {
    return { running: this.agents.size, starting: this.starting };
  }

  private async spawn(group: string, trigger: Record<string, string>): Promise<Agent> {
    this.starting++;
    const startedAt = performance.now();
    try {
      const agent = await this.startAgent(group, trigger);
      this.core.metrics.coldStart((performance.now() - startedAt) / 1000);
      return agent;
    } finally {
      this.starting--;
    }
  }

  private async startAgent(group: string, trigger: Record<string, string>): Promise<Agent> {
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
      if (this.quarantined.has(session.id)) {
        runner.close();
        throw new Error('session quarantined while the agent started');
      }
      agent.fsErrors = (await this.storage.fsErrors?.(group)) ?? 0;
      await this.checkWorkspaceLabel(group, session.id, container);
      this.agents.set(group, agent);
      agent.unwatch = this.storage.watch?.(group, (used, quota) => void this.overQuota(group, agent, used, quota));
      this.core.publish('agent.started', group, { session: session.id });
      return agent;
    } catch (err) {
      await this.teardown({ session: session.id, container, apiDir, privateDir });
      const noSpace = err instanceof NoDiskSpace;
      if (!this.quarantined.has(session.id)) this.core.publish('agent.error', group, { session: session.id, reason: noSpace ? err.message : 'the agent could not be started', ...trigger });
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
   * Before the first turn: files a labelled session of the group may have written label this
   * one too (workspace-labels.ts). Only for such groups; a runtime that cannot look labels it.
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

  /** Stops a group's agent: container, LLM endpoint, session socket, overlays. */
  async retire(group: string): Promise<void> {
    const agent = this.agents.get(group);
    if (!agent) return;
    this.agents.delete(group);
    this.states.set(group, 'stopped', { container: null, session: null });
    if (agent.idle) clearTimeout(agent.idle);
    agent.unwatch?.();
    agent.runner.close();
    await this.teardown(agent);
  }

  /**
   * Ends the group's agent now, its turn included (the console's Stop; a model API that
   * refused the key): the turn ends with `reason`, which is audited and told on the
   * group's channels. False when the group has no agent.
   */
  async end(group: string, reason: string, by: string): Promise<boolean> {
    const agent = this.agents.get(group);
    if (!agent) {
      if (!this.spawning.has(group)) return false;
      this.spawning.set(group, { reason, by });
      return true;
    }
    agent.ended = reason;
    this.core.audit.record({ group, session: agent.session, source: by, topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: `agent stopped: ${reason}` });
    await this.retire(group);
    return true;
  }

  /** The live agent's group for a session, if it still has one. */
  groupOf(session: string): string | null {
    for (const [group, agent] of this.agents) if (agent.session === session) return group;
    return null;
  }

  /** Watchdog disk quota: past it the agent is stopped (its turn ends as exited) and the user told. */
  private async overQuota(group: string, agent: Agent, used: number, quota: number): Promise<void> {
    if (this.agents.get(group) !== agent) return;
    const [usedMb, quotaMb] = [Math.round(used / 2 ** 20), Math.round(quota / 2 ** 20)];
    this.core.audit.record({ group, session: agent.session, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', severity: 'CRITICAL', reason: `agent disk use ${usedMb} MB passed its quota of ${quotaMb} MB; container stopped` });
    this.core.publish('user.notify', group, { text: `The agent was stopped: its files use ${usedMb} MB, over the quota of ${quotaMb} MB. Free space in its workspace before its next run.` });
    await this.retire(group);
  }

  /** What a started (or half-started) agent holds, removed in this order. */
  private async teardown(held: Pick<Agent, 'session' | 'privateDir' | 'apiDir'> & { container: string | null }): Promise<void> {
    if (held.container) await this.runtime.remove(held.container).catch(() => undefined);
    if (held.apiDir) rmSync(held.apiDir, { recursive: true, force: true });
    await this.llm.close(held.session);
    await this.core.closeSession(held.session);
    rmSync(held.privateDir, { recursive: true, force: true });
  }

  live(group: string): { session: string; container: string } | null {
    const agent = this.agents.get(group);
    return agent ? { session: agent.session, container: agent.container } : null;
  }

  /** The first step of a shutdown: messages that arrive from now on start no turn. */
  refuseTurns(): void {
    this.stopped = true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.fsCheck) clearInterval(this.fsCheck);
    this.turns.clear({ ok: false, output: 'stopping' });
    await Promise.all([...this.agents.keys()].map((g) => this.retire(g)));
    await this.storage.release?.().catch((err: unknown) =>
      this.core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: 'could not detach the workspaces\' loop devices on the way out', detail: String((err as Error)?.message ?? err) }),
    );
  }
}
