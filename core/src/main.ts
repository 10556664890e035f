// The core process: load configuration, start, serve until SIGTERM, then shut down
// gracefully. A broken carapace.json puts it in safe mode (safe-mode/) until it is fixed;
// any other start-up problem is one clear line and exit code 1.
import pino from 'pino';
import { join } from 'node:path';
import { startAdminApi } from './admin/http-api.js';
import { AgentManager } from './agents/agent-manager.js';
import { DockerRuntime } from './agents/docker-runtime.js';
import { LlmProxy } from './llm/llm-proxy.js';
import { UsageStore } from './llm/usage-store.js';
import { loadConfig, type CoreConfig } from './config.js';
import { Core } from './core.js';
import { notHandledNotice, UnfinishedTurns, type UnfinishedTurn } from './agents/unfinished-turns.js';
import { StartupError } from './protocol/errors.js';
import { auditFile, coreSecrets, pathsFromEnv, type Paths } from './settings.js';
import { AuditLog } from './audit/audit-log.js';
import { ConfigError } from './config-errors.js';
import { consoleSessions, type ConsoleSessions } from './console/console-login.js';
import { createSanitizer } from './response/sanitize.js';
import { safeModeUntilFixed } from './safe-mode/safe-mode.js';
import { FileStore } from './files/file-store.js';
import { adminToken } from './console/admin-token.js';
import { unclaimedBytes } from './agents/workspace-claims.js';
import { writeDefaultConfig } from './first-run-config.js';
import { runChecks, type Report } from './doctor/checks.js';
import { SOCKETS } from './plugins/host-protocol.js';
import { ConversationStore } from './conversation/conversation-store.js';
import { WorkspaceLabels } from './agents/workspace-labels.js';
import { migrationText, onMigration } from './state/format-migrations.js';
import { leftoverVolumes } from './doctor/leftover-volumes.js';
import { ConversationKeeper } from './conversation/conversation-keeper.js';
import { startBackups } from './backup/core-backups.js';
import { sandboxRuns } from './sandbox-runs/wiring.js';
import { skillRuns } from './skills/wiring.js';
import { skillViews } from './skills/skill-views.js';

const log = pino({ base: { service: 'core' } });
const NO_MODEL_KEY = 'no model credential: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN in .env, then run docker compose up -d again';

const ADMIN_HOST = process.env.CARAPACE_ADMIN_HOST || '127.0.0.1';
const ADMIN_PORT = Number(process.env.CARAPACE_ADMIN_PORT || 8780);
const SECURE_COOKIE = process.env.CARAPACE_CONSOLE_SECURE_COOKIE === '1';

/** The configuration; while the file is broken, the safe mode's console until it is fixed. */
async function configuration(paths: Paths, token: string, sessions: ConsoleSessions): Promise<CoreConfig> {
  try {
    return loadConfig(paths.configFile);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`carapace: ${err.code}: ${err.message}; safe mode: the console (http://${ADMIN_HOST}:${ADMIN_PORT}) says so until it is fixed\n`);
    const audit = new AuditLog(auditFile(paths), createSanitizer([...coreSecrets(), token]).scrub);
    try {
      return await safeModeUntilFixed(err.problem, { configFile: paths.configFile, host: ADMIN_HOST, port: ADMIN_PORT, token, sessions, audit, secureCookie: SECURE_COOKIE });
    } finally {
      await audit.close();
    }
  }
}

async function main(): Promise<void> {
  const paths = pathsFromEnv();
  if (writeDefaultConfig(paths.configFile)) log.info({ file: paths.configFile }, 'no carapace.json: wrote the default (group "main", web chat; Telegram off until its token is in .env)');
  const admin = adminToken(paths.dataDir, process.env.CARAPACE_ADMIN_TOKEN || undefined);
  if (admin.origin === 'created') log.info({ file: admin.file }, 'made an admin token for the console and the CLI: `make token` prints it');
  const sessions = consoleSessions();
  const config = await configuration(paths, admin.token, sessions);
  // Without a model key the core still starts, so that the console can say what is wrong;
  // agents are not started and each message gets that answer.
  const noModelKey = !process.env.ANTHROPIC_API_KEY && !process.env.CLAUDE_CODE_OAUTH_TOKEN;
  if (noModelKey) process.stderr.write(`carapace: CONFIG_INVALID: ${NO_MODEL_KEY}\n`);
  const runtime = new DockerRuntime({ sandbox: config.agents.runtime, image: config.agents.image });
  // Decided before the core starts (from then on nothing may be awaited until events are
  // taken, see below); a wrong setting stops the start here with one clear line.
  const sandbox = await runtime.sandbox();
  if (sandbox.runtime === 'runsc') log.info({ agentRuntime: 'runsc', reason: sandbox.reason }, 'agents run in gVisor (runsc)');
  else log.warn({ agentRuntime: 'runc', reason: sandbox.reason, howToGetRunsc: sandbox.hint }, 'agents run under runc, sharing the host kernel');
  const core = await Core.start({ runDir: paths.runDir, pluginsDir: paths.pluginsDir, skillsDir: paths.skills.own, documentsDir: paths.documentsDir, auditFile: auditFile(paths), config, secrets: [...coreSecrets(), admin.token], standingApprovalsFile: join(paths.dataDir, 'standing-approvals.json'), eventKeysFile: join(paths.dataDir, 'event-keys.sqlite'), heldEventsFile: join(paths.dataDir, 'held-events.sqlite'), configFile: paths.configFile });
  // Stored files brought to the current format (DESIGN 18), now and as stores open: said in Activity.
  onMigration((m) => core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: migrationText(m) }));
  // Files agents send a person (a chart, a report): read from the agent's own container, checked and kept by the core.
  const files = new FileStore(join(paths.dataDir, 'files'));
  core.acceptFiles({ read: (container, path, max) => runtime.readFile(container, path, max), store: files });
  const upstream = process.env.CARAPACE_MODEL_API_URL || 'https://api.anthropic.com';
  const credential = { apiKey: process.env.ANTHROPIC_API_KEY || undefined, oauthToken: process.env.CLAUDE_CODE_OAUTH_TOKEN || undefined };
  const llm = new LlmProxy({
    upstream,
    credential,
    audit: core.audit,
    settings: config.llm,
    usage: new UsageStore(join(paths.dataDir, 'llm', 'usage.sqlite'), (problem) => {
      log.error(problem, 'the LLM usage file was unreadable: moved aside, today\'s usage counts afresh');
      core.audit.record({ group: null, session: null, source: 'llm-proxy', topic: null, correlation: null, stage: 'llm', outcome: 'error', reason: `usage file unreadable (${problem.error}); moved to ${problem.movedTo}` });
    }),
    notify: (group, text) => void core.publish('user.notify', group, { text }),
    // A key the model API refuses: the turn ends now with the reason, instead of retrying.
    overBudget: (group, seconds) => agents.holdFor(group, seconds * 1000),
    refused: (session, group, problem) => {
      if (agents.groupOf(session) === group) void agents.end(group, problem.message, 'llm-proxy');
    },
  });
  const unfinished = new UnfinishedTurns(
    join(paths.dataDir, 'unfinished-turns.sqlite'),
    (problem) => {
      log.error(problem, 'the unfinished-turns file was unreadable: moved aside; messages a crash interrupted before it cannot be reported');
      core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: `unfinished-turns file unreadable (${problem.error}); moved to ${problem.movedTo}` });
    },
    (err) => log.error({ err: err.message }, 'could not record an accepted message: it is handled, but a crash now would drop it without a notice'),
  );
  // Each group's conversation as the person saw it: a new session hears its recent part.
  const conversations = new ConversationStore(join(paths.dataDir, 'conversation.sqlite'), config.conversation, (problem) => {
    log.error(problem, 'the conversation file was unreadable: moved aside; new sessions start without the earlier conversation');
    core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: `conversation file unreadable (${problem.error}); moved to ${problem.movedTo}` });
  });
  const conversation = new ConversationKeeper(core, conversations, config.conversation, (group): Promise<void> => agents.forget(group));
  const agents = new AgentManager(core, runtime, llm, config.agents, {
    groupsDir: paths.groupsDir,
    stateDir: join(paths.dataDir, 'agents'),
    agentImageDir: paths.agentImageDir,
    instance: process.env.CARAPACE_INSTANCE || 'carapace',
    apiKeyDir: paths.apiKeyDir,
  }, () => Object.keys(config.groups), undefined, unfinished, conversation, new WorkspaceLabels(join(paths.dataDir, 'workspace-labels.json'), (problem) => {
    // Labels lost: a file a labelled session wrote no longer labels later sessions. Loud.
    core.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', severity: 'CRITICAL', reason: `workspace labels unreadable (${problem.error}); moved to ${problem.movedAside}: files written after reading external content are no longer marked` });
  }));
  // Programs the agents run (run_program): a sandbox per session, never the agent's container.
  const programs = sandboxRuns({ runtime, storage: agents.storage, audit: core.audit, settings: config.sandbox, instance: process.env.CARAPACE_INSTANCE || 'carapace' });
  // Skills (run_skill): each in a sandbox of its own per session, with its own network and secrets.
  const skills = skillRuns({ programs, runtime, settings: config.sandbox, folders: paths.skills, sections: config.skills, audit: core.audit, log, relayDir: join(paths.runDir, 'skill-relays') });
  core.acceptRuns(programs.runs, (session) => programs.sandboxes.end(session), skills);
  core.metrics.agents(() => agents.counts());
  core.metrics.llmTokens(() => llm.usage(Object.keys(config.groups)));
  // Plugins may publish (a Telegram message waiting since the last run) as soon as the
  // plugin host connects: take events from now on, with no await since Core.start, or
  // they are lost. Each is recorded at once (the host's receipt follows) and runs once an
  // earlier run's orphaned agents are gone.
  const swept = agents.removeOrphans();
  // What an earlier run accepted and never finished: told once the channels can say it
  // (the plugins may have settled while Core.start was still opening its sockets).
  const announceLeftovers = (): void => {
    const byGroup = new Map<string, UnfinishedTurn[]>();
    for (const turn of unfinished.takeLeftovers()) byGroup.set(turn.group, [...(byGroup.get(turn.group) ?? []), turn]);
    for (const [group, turns] of byGroup) {
      core.audit.record({ group, session: null, source: 'core', topic: null, correlation: null, stage: 'agent', outcome: 'error', reason: `${turns.length} accepted ${turns.length === 1 ? 'event was' : 'events were'} not handled: the core stopped before the agent finished; user told`, detail: turns.map((t) => `${t.topic} ${t.id} from ${t.source}`).join('\n') });
      core.publish('user.notify', group, { text: notHandledNotice(turns) });
    }
  };
  core.on('plugins-settled', announceLeftovers);
  if (core.pluginsSettled()) announceLeftovers();
  core.on('event', (event) => {
    // A person's message is kept; "/forget" is theirs to Carapace and reaches no agent.
    if (conversation.take(event)) return;
    if (noModelKey && (event.topic === 'message.inbound' || event.topic === 'task.triggered') && event.group !== null) {
      core.audit.record({ group: event.group, session: null, source: 'core', topic: event.topic, correlation: null, stage: 'agent', outcome: 'error', reason: NO_MODEL_KEY });
      core.publish('agent.error', event.group, { reason: NO_MODEL_KEY });
      return;
    }
    agents.onEvent(event)?.catch((err: unknown) => log.error({ err, group: event.group }, 'agent run failed'));
  });
  const workspaces = { name: 'workspaces', path: paths.groupsDir, claims: () => unclaimedBytes(paths.groupsDir, Object.keys(core.config.groups), config.agents) };
  // Scheduled backups (backup/): daily by default, into the backups folder; the Overview and the Checks page show the last one.
  const backups = await startBackups({ settings: config.backups, paths, runtime, audit: core.audit, agentImage: config.agents.image, instance: process.env.CARAPACE_INSTANCE || 'carapace', log });
  const checks = (): Promise<Report> =>
    runChecks({
      model: { upstream, credential },
      docker: { ping: () => runtime.docker.ping(), hasImage: (name) => runtime.docker.getImage(name).inspect().then(() => true) },
      agentImage: config.agents.image,
      sandboxImage: config.sandbox.image,
      plugins: () => core.catalog.states(),
      audit: () => core.audit.health(),
      folders: [{ name: 'logs', path: paths.logDir }, { name: 'data', path: paths.dataDir }, workspaces],
      sandbox,
      config: () => core.configStatus(),
      leftovers: async () => {
        const project = await runtime.composeProject();
        return project === null ? null : leftoverVolumes(runtime.docker, project);
      },
      backups: () => backups.schedule.view(),
    });
  const server = await startAdminApi(
    core,
    ADMIN_HOST,
    ADMIN_PORT,
    admin.token,
    {
      usage: () => llm.usage(Object.keys(config.groups)),
      checks,
      health: { agent_runtime: sandbox.runtime },
      console: {
        agents,
        usageHistory: (days) => llm.usageHistory(days),
        model: () => llm.modelHealth(),
        files,
        folders: [{ name: 'audit logs', path: paths.logDir }, workspaces, { name: 'data', path: paths.dataDir }],
        secureCookie: SECURE_COOKIE,
        sessions,
        conversation,
        backups: () => backups.schedule.view(),
        skills: () => skillViews(skills.runner, process.env),
        panels: () => core.catalog.panels().map((p) => ({ ...p, socket: join(paths.runDir, SOCKETS.panels, `${p.name}.sock`) })),
      },
    },
  );
  const orphans = await swept;
  log.info({ runDir: paths.runDir, plugins: core.catalog.pluginNames(), orphansRemoved: orphans, diskQuota: agents.storage.describe(), backups: { schedule: config.backups.schedule, at: config.backups.at, dir: backups.dir, runner: backups.runner } }, 'core started');
  if (agents.storage.mode === 'off') log.warn({ diskQuota: agents.storage.describe() }, 'agent disk quotas are off');
  // Agents take no new turn, but keep their containers until the drain is over: a tool
  // call that finishes during it still reaches the agent that made it.
  const stop = (): void => {
    log.info('stopping');
    agents.refuseTurns();
    backups.schedule.stop();
    void server
      .close()
      .then(() => core.stop())
      .then(() => agents.stop())
      .then(() => programs.sandboxes.stop())
      .then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  if (err instanceof StartupError) {
    process.stderr.write(`carapace: ${err.code}: ${err.message}\n`);
  } else {
    log.fatal({ err }, 'core failed to start');
  }
  process.exit(1);
});
