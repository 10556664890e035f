// Event-to-agent logic and the container lifecycle. Each group has at most one live
// agent container, handles its messages one at a time in order, keeps it warm until
// an idle timeout, and never shares it with another group.
// Starting and removing one agent (its container, in either mode): agent-launcher.ts.
import type { AgentSettings } from '../config.js';
import type { Core } from '../core.js';
import type { Brief } from '../conversation/earlier-conversation.js';
import type { LlmProxy } from '../llm/llm-proxy.js';
import type { AgentCounts } from '../metrics/metrics.js';
import { carriesUntrustedInput } from '../pipeline/untrusted-input.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import { AgentLauncher, type Agent, type AgentPaths } from './agent-launcher.js';
import { AgentStates } from './agent-states.js';
import { promptFor } from './prompt.js';
import type { AgentRuntime } from './runtime.js';
import { engineOf, groupStorage, type GroupStorage } from './storage.js';
import { batchPrompt, TurnQueue, type QueuedTurn } from './turn-queue.js';
import type { UnfinishedTurns } from './unfinished-turns.js';
import { noteFailure, noteReply, tellNoAnswer, tellOverflow, type RunningTurn } from './turn-notices.js';
import { WorkspaceLabels } from './workspace-labels.js';

export type { AgentPaths };

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
    overflowed: (group, turn, waiting) => tellOverflow(this.core, group, turn, waiting),
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
  private readonly launcher: AgentLauncher;

  constructor(
    private readonly core: Core,
    private readonly runtime: AgentRuntime,
    llm: LlmProxy,
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
    this.launcher = new AgentLauncher(core, runtime, llm, settings, paths, storage, workspaceLabels);
    core.sessions.onLabelled((session) => workspaceLabels.labelled(session.group));
    core.on('quarantined', ({ session, group }) => this.onQuarantined(session, group));
    core.on('replied', (reply) => {
      const turn = this.turnOf(reply.group, reply.session);
      if (turn) noteReply(turn, reply, this.unfinished);
    });
    core.on('reply-failed', (failure) => {
      const turn = this.turnOf(failure.group, failure.session);
      if (turn) noteFailure(turn, failure);
    });
    if (storage.fsErrors) {
      this.fsCheck = setInterval(() => void this.checkFileSystems(), FS_CHECK_MS);
      this.fsCheck.unref();
    }
  }

  /** The turn `session` runs now in `group`, if any: its replies (and failed ones) are noted on it (turn-notices.ts). */
  private turnOf(group: string, session: string): RunningTurn | undefined {
    const agent = this.agents.get(group);
    return agent?.session === session ? agent.turn : undefined;
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
    const turn = (agent.turn = { causes, replied: false, failures: [] });
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
    if (ok && !turn.replied && lastMessage) tellNoAnswer(this.core, group, agent.session, lastMessage, turn.failures);
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

  private async startAgent(group: string, trigger: Record<string, string>): Promise<Agent> {
    const agent = await this.launcher.launch(group, trigger, this.quarantined);
    this.agents.set(group, agent);
    agent.unwatch = this.storage.watch?.(group, (used, quota) => void this.overQuota(group, agent, used, quota));
    this.core.publish('agent.started', group, { session: agent.session });
    return agent;
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

  /** Stops a group's agent: container, LLM endpoint, session socket, overlays. */
  async retire(group: string): Promise<void> {
    const agent = this.agents.get(group);
    if (!agent) return;
    this.agents.delete(group);
    this.states.set(group, 'stopped', { container: null, session: null });
    if (agent.idle) clearTimeout(agent.idle);
    agent.unwatch?.();
    agent.runner.close();
    await this.launcher.teardown(agent);
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
