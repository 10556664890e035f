// Wires the parts together: sessions and their sockets (the trust boundary), the
// pipeline, the plugin host link, the event bus, confirmations and the audit log.
import { EventEmitter } from 'node:events';
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { callOutcomes } from './agents/replies.js';
import { AuditLog } from './audit/audit-log.js';
import { tellAuditOutages } from './audit/audit-outages.js';
import type { Abuse } from './boundary/session-guard.js';
import { SessionSockets } from './boundary/session-sockets.js';
import { SessionTable, type Session } from './boundary/session-table.js';
import { EventBus } from './bus/event-bus.js';
import type { SeenKeys } from './bus/seen-keys.js';
import { EventIntake, MAX_EVENT_ID } from './bus/event-intake.js';
import { HeldEvents } from './bus/held-events.js';
import { Metrics } from './metrics/metrics.js';
import type { CoreConfig } from './config.js';
import type { ConfigProblem } from './config-errors.js';
import { applyLive, type LiveTargets } from './config-watch/apply-config.js';
import type { ConfigDiff } from './config-watch/config-diff.js';
import { ConfigReload } from './config-watch/config-reload.js';
import { pluginSectionProblem } from './config-watch/plugin-sections.js';
import type { CallState } from './confirm/call-state.js';
import { describeState, memoryBrief, type PluginHookDeps } from './plugins/plugin-hooks.js';
import { Confirmations } from './confirm/confirmations.js';
import { announceConfirmations } from './confirm/confirmation-events.js';
import { WaitingCalls } from './confirm/waiting-calls.js';
import type { StandingApprovals, Grant, GrantRefusal, StandingApproval } from './confirm/standing-approvals.js';
import { describeIntrinsic, INTRINSIC_NAMES, intrinsicTools, type ProgramRunner, type SkillRunner } from './intrinsics/intrinsics.js';
import { RUN_PROGRAM_NAME } from './sandbox-runs/run-program-tool.js';
import { ProposedPlaces } from './proposed-writes/proposed-places.js';
import { LIST_SKILLS_NAME, RUN_SKILL_NAME } from './skills/run-skill-tool.js';
import { GroupAuthorizer } from './pipeline/authorize.js';
import type { PipelineDeps } from './pipeline/pipeline.js';
import type { AttachDeps } from './files/attach-files.js';
import { RateLimiter } from './pipeline/rate-limit.js';
import { RecentRequests } from './pipeline/recent-requests.js';
import { ToolCatalog } from './plugins/catalog.js';
import { discoverPlugins, type ToolEntry } from './plugins/discovery.js';
import { SOCKETS, type PublishedEvent } from './plugins/host-protocol.js';
import { answerService, type ServiceDeps } from './plugins/services.js';
import { PluginHostLink } from './plugins/host-link.js';
import { HostSession } from './plugins/host-session.js';
import { PluginPowers } from './plugins/plugin-powers.js';
import { ConnectionChecks } from './plugins/connection-checks.js';
import { PersonAnswers, type PersonAnswer } from './confirm/person-answers.js';
import type { CoreEvents, CoreOptions } from './core-types.js';
import { pluginSection } from './plugins/plugin-settings.js';
import { stopPlugins } from './plugins/stop-plugins.js';
import { openSeenKeys, openStandingApprovals } from './core-stores.js';
import { eventEnvelope, type EventEnvelope, type JsonObject } from './protocol/envelope.js';
import { createSanitizer, type Sanitizer } from './response/sanitize.js';
import { Pairing } from './pairing/pairing.js';
import { APP_VERSION } from './version.js';

export { APP_VERSION } from './version.js';
export type { CoreEvents, CoreOptions, Reply, ReplyFailure } from './core-types.js';

export class Core extends EventEmitter<CoreEvents> {
  readonly audit: AuditLog;
  readonly catalog: ToolCatalog;
  readonly confirmations: Confirmations;
  readonly standing: StandingApprovals;
  readonly metrics: Metrics;
  readonly pairing: Pairing;
  /** Plugins' connection checks, for the Checks page (plugins/connection-checks.ts). */
  readonly connections: ConnectionChecks;
  private readonly answers: PersonAnswers;
  private readonly hooks: PluginHookDeps;
  readonly sessions = new SessionTable();
  private readonly sessionSockets: SessionSockets;
  private readonly seenKeys: SeenKeys;
  private readonly hostLink = new PluginHostLink();
  private readonly host: HostSession;
  private readonly bus = new EventBus();
  private readonly authorizer: GroupAuthorizer;
  private readonly powers: PluginPowers;
  private readonly limiter: RateLimiter;
  private readonly deps: PipelineDeps;
  private secrets: Set<string>;
  private current: Sanitizer;
  private stopping: Promise<void> | null = null;
  private reload: ConfigReload | null = null;
  private readonly intake: EventIntake;
  /** What a changed carapace.json updates besides the configuration object. */
  private readonly live: LiveTargets;

  private constructor(private readonly options: CoreOptions) {
    super();
    const { config } = options;
    this.secrets = new Set(options.secrets ?? []);
    this.current = createSanitizer(this.secrets);
    const sanitize = Object.assign(<T>(value: T) => this.current(value), { scrub: (text: string) => this.current.scrub(text) });
    // Discovery first: a start-up conflict must stop us before the audit file is opened
    // (pino cannot flush a destination that never became ready).
    const discovery = discoverPlugins(options.pluginsDir, APP_VERSION, INTRINSIC_NAMES);
    this.audit = new AuditLog(options.auditFile, sanitize.scrub, undefined, { ...config.audit, retry_ms: options.auditRetryMs });
    tellAuditOutages(this.audit, () => this.sessions.all().map((s) => s.group), (group, text) => void this.publish('user.notify', group, { text }));
    this.catalog = new ToolCatalog(intrinsicTools, discovery.plugins, discovery.rejected);
    // Offered once main.ts hands the core its sandboxes (acceptRuns).
    for (const name of [RUN_PROGRAM_NAME, RUN_SKILL_NAME, LIST_SKILLS_NAME]) this.catalog.offerCoreTool(name, false);
    this.host = new HostSession({
      hostLink: this.hostLink,
      catalog: this.catalog,
      audit: this.audit,
      config,
      addSecrets: (secrets) => this.addSecrets(secrets),
      scrub: (text) => this.current.scrub(text),
      publish: (topic, group, payload) => void this.publish(topic, group, payload),
      settled: () => this.emit('plugins-settled'),
      ready: (plugin) => this.bus.release(plugin),
    });
    for (const bad of discovery.rejected) this.host.auditFailure(bad.name, 'CONFIG_ERROR', bad.reason);
    this.authorizer = new GroupAuthorizer(config);
    this.powers = new PluginPowers(this.catalog, config, this.authorizer);
    this.limiter = new RateLimiter(config.rate_limit, config.tool_rate_limits);
    this.live = { limiter: this.limiter, allowHiddenCharacters: new Set(config.confirmations.allow_hidden_characters), allowAfterExternal: new Set(config.confirmations.allow_after_external_content) };
    this.confirmations = new Confirmations(config.confirmation_timeout_ms, config.confirmations.max_pending_per_group);
    announceConfirmations(this.confirmations, (topic, group, payload) => this.publish(topic, group, payload), this.audit);
    this.standing = openStandingApprovals(options.standingApprovalsFile ?? null, this.audit);
    this.seenKeys = openSeenKeys(options.eventKeysFile ?? null, this.audit);
    // The channel maps the paired chat itself: the host only takes its new section for a later start.
    this.pairing = new Pairing({ config, configFile: options.configFile ?? null, audit: this.audit, publish: (topic, group, payload) => this.publish(topic, group, payload), sectionChanged: (plugin) => {
        this.host.reconfigure([], [plugin]);
        this.intake.retry();
      },
    });
    this.intake = new EventIntake({
      catalog: this.catalog,
      powers: this.powers,
      seenKeys: this.seenKeys,
      held: new HeldEvents(options.heldEventsFile ?? null, (problem) => this.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'event', outcome: 'error', reason: `held events file unreadable (${problem.error}); moved to ${problem.movedTo}: messages kept for a configuration that allows them are lost` })),
      audit: this.audit,
      accept: (topic, group, payload, plugin) => {
        const envelope = this.publish(topic, group, payload, plugin, plugin);
        this.emit('event', envelope);
        return envelope;
      },
    });
    this.hooks = { catalog: this.catalog, hostLink: this.hostLink, audit: this.audit, sanitizer: () => this.current };
    this.answers = new PersonAnswers({ catalog: this.catalog, authorizer: this.authorizer, standing: this.standing, confirmations: this.confirmations, audit: this.audit, describeState: (tool, group, args) => this.describeState(tool, group, args) });
    this.connections = new ConnectionChecks({
      catalog: this.catalog,
      ask: (plugin, timeoutMs) => this.hostLink.connectionCheck(plugin, timeoutMs),
      configured: (plugin) => Object.keys(pluginSection(config.plugins, plugin)).length > 0,
      scrub: (text) => this.current.scrub(text),
      audit: this.audit,
    });
    this.metrics = new Metrics({ catalog: this.catalog, audit: () => this.audit.health(), pendingConfirmations: () => this.confirmations.list().length });
    this.deps = {
      metrics: this.metrics,
      catalog: this.catalog,
      authorizer: this.authorizer,
      limiter: this.limiter,
      confirmations: this.confirmations,
      audit: this.audit,
      sanitize,
      recent: new RecentRequests(),
      standing: this.standing,
      describeState: (tool, session, args) => this.describeState(tool, session.group, args, session.id),
      calls: new WaitingCalls(config.handler_timeout_ms + config.handler_abort_grace_ms, config.confirmations.keepalive_ms),
      allowHiddenCharacters: this.live.allowHiddenCharacters,
      allowAfterExternal: this.live.allowAfterExternal,
      pluginConfig: (plugin) => (Object.hasOwn(config.plugins, plugin) ? config.plugins[plugin] : undefined),
      ...callOutcomes({ catalog: this.catalog, emit: { replyFailed: (f) => this.emit('reply-failed', f), replied: (r) => this.emit('replied', r) }, markUntrustedInput: (id) => this.sessions.markUntrustedInput(id), scrub: (text) => this.current.scrub(text) }),
      route: {
        catalog: this.catalog,
        hostLink: this.hostLink,
        intrinsics: { audit: this.audit, catalog: this.catalog, authorizer: this.authorizer, places: new ProposedPlaces({ skills: options.skillsDir, documents: options.documentsDir }), keptFile: (id) => this.deps.files?.store.read(id)?.bytes ?? null },
        timeoutMs: config.handler_timeout_ms,
        abortGraceMs: config.handler_abort_grace_ms,
      },
    };
    this.sessionSockets = new SessionSockets({
      runDir: options.runDir,
      config,
      sessions: this.sessions,
      pipeline: this.deps,
      limiter: this.limiter,
      confirmations: this.confirmations,
      audit: this.audit,
      publish: (topic, group, payload) => void this.publish(topic, group, payload),
      closed: (event) => this.emit('session-closed', event),
      quarantined: (event) => this.emit('quarantined', event),
    });
  }

  /** Lets tools with file arguments send files from agents' workspaces (main.ts: the engine's reader, the core's store). */
  acceptFiles(files: AttachDeps): void {
    this.deps.files = files;
  }

  /**
   * Lets agents run programs (run_program, sandbox-runs/) and skills (run_skill, skills/):
   * offered from now on, the skills' secrets scrubbed like the plugins'; `endSession`
   * removes a session's sandboxes when the session closes.
   */
  acceptRuns(runs: ProgramRunner, endSession: (session: string) => Promise<void>, skills?: { runner: SkillRunner; secrets: string[]; refresh(): string[] }): void {
    this.deps.route.intrinsics.runs = runs;
    this.catalog.offerCoreTool(RUN_PROGRAM_NAME, true);
    if (skills) {
      this.deps.route.intrinsics.skills = skills.runner;
      // A skill a person approved (propose_write) is found at once, its secrets scrubbed too.
      this.deps.route.intrinsics.skillsChanged = () => this.addSecrets(skills.refresh());
      for (const name of [RUN_SKILL_NAME, LIST_SKILLS_NAME]) this.catalog.offerCoreTool(name, true);
      this.addSecrets(skills.secrets);
    }
    this.on('session-closed', ({ session }) => void endSession(session).catch(() => undefined));
  }

  /** Values the sanitizer scrubs from every answer and audit entry from now on. */
  private addSecrets(secrets: Iterable<string>): void {
    for (const secret of secrets) this.secrets.add(secret);
    this.current = createSanitizer(this.secrets);
  }

  static async start(options: CoreOptions): Promise<Core> {
    const core = new Core(options);
    mkdirSync(join(options.runDir, SOCKETS.sessions), { recursive: true, mode: 0o755 });
    const services: ServiceDeps = {
      hostLink: core.hostLink,
      catalog: core.catalog,
      audit: core.audit,
      sessions: core.sessions,
      authorizer: core.authorizer,
      powers: core.powers,
      confirmations: core.confirmations,
      answerConfirmation: (id, approve, by, hours, hash) => core.answerConfirmation(id, approve, by, hours, hash),
      requestPairing: (plugin, chat, details) => core.pairing.request(plugin, chat, details),
      publish: (topic, group, payload, source) => void core.publish(topic, group, payload, source, source),
      readFile: (id) => core.deps.files?.store.read(id) ?? null,
    };
    core.hostLink.on('service', (m, reply) => reply(answerService(m, services)));
    await core.hostLink.open(`ipc://${join(options.runDir, SOCKETS.pluginHost)}`, join(options.runDir, SOCKETS.lanes));
    if (options.configFile && options.watchConfig !== false) {
      const schemaOf = (name: string) => core.catalog.discovered(name)?.manifest.config_schema;
      core.reload = new ConfigReload(options.configFile, { config: options.config, audit: core.audit, apply: (next, diff) => core.applyConfig(next, diff), checkSections: (next, text) => pluginSectionProblem(options.configFile!, text, next.plugins, schemaOf) });
      core.reload.start();
    }
    await core.bus.open(`ipc://${join(options.runDir, SOCKETS.busOut)}`, `ipc://${join(options.runDir, SOCKETS.busIn)}`, (t, e) => core.onPublished(t, e));
    // Only the plugin host (root, or the core's own user) may connect; never a plugin's uid.
    for (const socket of [SOCKETS.pluginHost, SOCKETS.busOut, SOCKETS.busIn]) chmodSync(join(options.runDir, socket), 0o600);
    core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: `core ${APP_VERSION} started` });
    return core;
  }

  // ---- sessions: the trust boundary (boundary/session-sockets.ts) --------------------

  async openSession(group: string): Promise<Session> {
    if (this.stopping) throw new Error('core is stopping');
    return this.sessionSockets.open(group);
  }

  closeSession(id: string): Promise<void> {
    return this.sessionSockets.close(id);
  }

  /** Ends a session that abused its budget, for good (idempotent). */
  quarantine(id: string, abuse: Abuse): Promise<void> {
    return this.sessionSockets.quarantine(id, abuse);
  }

  /** A plugin host is linked to this core now. */
  get pluginHostConnected(): boolean {
    return this.hostLink.connected;
  }

  /** carapace.json changed and is valid: what takes effect live does, everywhere (config-watch/). */
  private applyConfig(next: CoreConfig, diff: ConfigDiff): void {
    applyLive(this.options.config, next, this.live);
    this.host.reconfigure(diff.pluginsChanged.filter((name) => this.catalog.discovered(name) !== null));
    this.intake.retry();
  }

  /** Where carapace.json on disk is wrong (the last good one runs), and settings that wait for a restart. */
  configStatus(): { problem: ConfigProblem | null; waiting_for_restart: string[] } {
    return { problem: this.reload?.problem ?? null, waiting_for_restart: this.reload?.waitingForRestart ?? [] };
  }

  /** The running configuration (pairing adds groups and chats to it in place; a changed carapace.json replaces its live parts). */
  get config(): CoreConfig {
    return this.options.config;
  }

  /** The tools a group's agent may call now (intrinsics and healthy plugins' tools), for the console. */
  toolsOf(group: string): string[] {
    return this.catalog.available().map((t) => t.name).filter((name) => {
      const tool = this.catalog.lookup(name);
      return tool !== undefined && this.authorizer.mayUse(group, tool);
    });
  }

  // ---- events --------------------------------------------------------------------------

  /** Publishes a core event to every healthy (or starting) subscriber that may see the group. */
  publish(topic: string, group: string | null, payload: JsonObject, source = 'core', except?: string): EventEnvelope {
    const envelope = eventEnvelope(topic, source, group, payload);
    for (const plugin of this.catalog.subscribers(topic)) {
      if (plugin === except || (group !== null && !this.authorizer.pluginMaySee(plugin, group))) continue;
      void this.bus.deliver(plugin, envelope, this.catalog.state(plugin) === 'healthy').catch(() => undefined);
    }
    return envelope;
  }

  /**
   * An event is accepted, refused for good or held for a configuration that allows it, at
   * once, and the plugin host hears so (`received`): only then may its plugin save its
   * progress. A stopping core takes none and confirms none: the host keeps them for the next run.
   */
  private onPublished(topic: string, event: PublishedEvent): void {
    const state = this.catalog.state(event.plugin);
    if (this.stopping || state === 'draining' || state === 'stopped') {
      this.intake.auditEvent(topic, event, 'pending', 'not taken while the core stops: the plugin host keeps it for the next run');
      return;
    }
    const { held } = this.intake.take(topic, event);
    if (typeof event.id === 'string' && event.id.length <= MAX_EVENT_ID) this.hostLink.received(event.id, held);
  }

  // ---- plugin host -----------------------------------------------------------------

  /** No plugin is waiting for its init answer (see the `plugins-settled` event). */
  pluginsSettled(): boolean {
    return this.host.settled();
  }

  /**
   * What a call of a `describe` tool refers to, from its plugin (5 s at most): shown before
   * a person is asked and compared after (call-state.ts). Sanitized like any plugin output.
   */
  describeState(tool: ToolEntry, group: string, args: JsonObject, session = '', timeoutMs = 5000): Promise<CallState> {
    if (tool.owner === 'core') return Promise.resolve(describeIntrinsic(tool.name, args, this.deps.route.intrinsics));
    return describeState(this.hooks, tool, group, args, session, timeoutMs);
  }

  /** The memory brief for a new agent, if a plugin provides one; null on failure or timeout. */
  memoryBrief(group: string, timeoutMs = 5000): Promise<unknown> {
    return memoryBrief(this.hooks, group, timeoutMs);
  }

  // ---- standing approvals and answers: made only by a person (confirm/person-answers.ts) ----

  grantStanding(input: Grant): StandingApproval | GrantRefusal {
    return this.answers.grantStanding(input);
  }

  grantStandingDescribed(input: Omit<Grant, 'state'>): Promise<StandingApproval | GrantRefusal> {
    return this.answers.grantStandingDescribed(input);
  }

  revokeStanding(id: string, by: string): StandingApproval | null {
    return this.answers.revokeStanding(id, by);
  }

  /** The person lets the messages held for `plugin` go: how many were dropped. */
  discardHeld(plugin: string, by: string): number {
    return this.intake.discard(plugin, by);
  }

  answerConfirmation(id: string, approve: boolean, by: string, allowHours?: number, hash?: string): PersonAnswer {
    return this.answers.answerConfirmation(id, approve, by, allowHours, hash);
  }

  // ---- shutdown ------------------------------------------------------------------------

  /** Drain, shut handlers down (in parallel, bounded), close everything. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    const { handler_timeout_ms: drainMs, shutdown_timeout_ms: shutdownMs } = this.options.config;
    await stopPlugins({ catalog: this.catalog, hostLink: this.hostLink, confirmations: this.confirmations, audit: this.audit, bus: this.bus, publish: (topic, group, payload) => this.publish(topic, group, payload) }, drainMs, shutdownMs);
    await Promise.all(this.sessionSockets.ids().map((id) => this.closeSession(id)));
    await this.hostLink.close();
    await this.bus.close();
    this.seenKeys.close();
    this.intake.close();
    this.reload?.close();
    this.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: 'core stopped' });
    await this.audit.close();
  }
}
