// The web console, served by the admin API's fastify on its port (127.0.0.1 by default).
// Only the login page and its two files are public. Everything else (pages, assets, the
// JSON API under /api, the event stream, plugin panels under /plugins/<name>/) needs a
// session: an HttpOnly, SameSite=Strict cookie that only the admin token makes. Every
// state change also needs the session's CSRF token, and the CSP allows this origin only.
// The console decides nothing itself: it calls the same core methods as the admin API.
import type { SkillView } from '../skills/skill-views.js';
import { endedMessage } from '../confirm/ended-message.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AgentStates } from '../agents/agent-states.js';
import type { AuditOutcome } from '../audit/audit-log.js';
import type { Core } from '../core.js';
import type { GroupUsage } from '../llm/budgets.js';
import type { DayUsage } from '../llm/usage-store.js';
import type { ModelHealthReport } from '../llm/model-health.js';
import type { FileStore } from '../files/file-store.js';
import { createReadStream } from 'node:fs';
import { APP_VERSION } from '../version.js';
import { GROUP_NAME_PATTERN } from '../boundary/session-table.js';
import type { Report } from '../doctor/checks.js';
import { DiskUsage } from './disk-usage.js';
import { LiveEvents } from './live-events.js';
import { registerPanelProxy, type Panel } from './panel-proxy.js';
import { answerPairing, refusePairing } from '../pairing/answers.js';
import { registerLogin, registerShell, type ConsoleSessions } from './console-login.js';
import type { WorkspaceLabels } from '../agents/workspace-labels.js';
import type { ConversationKeeper } from '../conversation/conversation-keeper.js';
import type { BackupView } from '../backup/schedule.js';

export interface ConsoleDeps {
  core: Core;
  token: string;
  agents?: { states: AgentStates; end(group: string, reason: string, by: string): Promise<boolean>; workspaceLabels?: Pick<WorkspaceLabels, 'get' | 'reviewed'> };
  usage?: () => GroupUsage[];
  usageHistory?: (days: number) => DayUsage[];
  /** Whether the model API takes the key (the LLM proxy's last answer). */
  model?: () => ModelHealthReport;
  /** Files agents sent (checked and kept by the core), for download. */
  files?: FileStore;
  /** Folders whose size the Overview shows; `claims`: what may still be allocated on its disk (the workspaces). */
  folders?: { name: string; path: string; claims?: () => number }[];
  /** Plugins with a panel, and where their sockets are. */
  panels?: () => Panel[];
  /** The first-run checks (doctor). */
  checks?: () => Promise<Report>;
  /** Set the cookie's Secure flag (behind an https proxy). */
  secureCookie?: boolean;
  /** Login attempts per client per minute (default 10). */
  loginPerMinute?: number;
  /** The process's console sessions (a login in safe mode stays valid after it). */
  sessions?: ConsoleSessions;
  /** Each group's kept conversation (conversation/): shown and cleared per group. */
  conversation?: Pick<ConversationKeeper, 'list' | 'clear' | 'keptSince'>;
  /** The last backup and the schedule (backup/schedule.ts), for the Overview. */
  backups?: () => BackupView;
  /** The skills the core found, with what each may reach and receive (the Skills page). */
  skills?: () => SkillView[];
}


export const NO_CONNECTION_CHECK = 'no connection check for that plugin: it offers none, or carapace.json has no settings for it';

const OUTCOMES = new Set<AuditOutcome>(['passed', 'routed', 'rejected', 'sanitized', 'error', 'ok', 'dropped', 'pending']);

export async function registerConsole(app: FastifyInstance, deps: ConsoleDeps): Promise<LiveEvents> {
  const { core } = deps;
  const live = new LiveEvents();
  core.audit.on('entry', (entry) => live.publish({ type: 'audit', ...entry }));
  deps.agents?.states.on('change', (state) => live.publish({ type: 'agent', ...state }));
  // Before the server closes: an open stream would otherwise hold the close up.
  app.addHook('preClose', async () => live.close());
  const disk = new DiskUsage(deps.folders ?? []);

  await registerLogin(app, {
    token: deps.token,
    sessions: deps.sessions,
    secureCookie: deps.secureCookie,
    loginPerMinute: deps.loginPerMinute,
    audit: core.audit,
  });

  // ---- everything else: session, then CSRF on state changes ---------------------------
  await app.register(async (authed) => {
    await registerShell(authed);

    authed.get('/api/overview', async () => {
      return {
        version: APP_VERSION,
        uptime_s: Math.round(process.uptime()),
        plugin_host: core.pluginHostConnected,
        model: deps.model?.() ?? null,
        plugins: core.catalog.states(),
        config: core.configStatus(),
        agents: deps.agents?.states.list() ?? [],
        audit: core.audit.health(),
        disk: await disk.read(),
        budgets: deps.usage?.() ?? [],
        pending_confirmations: core.confirmations.list().length,
        backups: deps.backups?.() ?? null,
        live_streams: { open: live.open, dropped: live.dropped },
      };
    });

    authed.get('/api/confirmations', async () => ({ pending: core.confirmations.list(), standing: core.standing.list() }));
    // The page sends the hash of the description it showed: an answer to anything else is refused.
    const answer = (approve: boolean) => async (request: FastifyRequest<{ Params: { id: string }; Body: { allow_hours?: unknown; hash?: unknown } | null }>, reply: FastifyReply) => {
      const hours = request.body?.allow_hours;
      if (hours !== undefined && typeof hours !== 'number') return reply.code(400).send({ code: 'INVALID_INPUT', message: 'allow_hours must be a number of hours' });
      const hash = request.body?.hash;
      if (hash !== undefined && typeof hash !== 'string') return reply.code(400).send({ code: 'INVALID_INPUT', message: 'hash must be the hex sha256 of the description shown' });
      const { answered, stale, standing } = core.answerConfirmation(request.params.id, approve, 'console', hours, hash);
      if (stale) return reply.code(409).send({ code: 'STALE', message: 'this answer was for other arguments than the request now pending (the page was out of date): nothing was decided; look again and answer once more' });
      if (!answered) return reply.code(404).send({ code: 'NOT_FOUND', message: endedMessage(core.confirmations.status(request.params.id)) });
      return { id: request.params.id, decision: approve ? 'approved' : 'denied', ...(standing ? { standing } : {}) };
    };
    authed.post('/api/confirmations/:id/approve', answer(true));
    authed.post('/api/confirmations/:id/deny', answer(false));
    authed.delete<{ Params: { id: string } }>('/api/standing/:id', async (request, reply) => {
      const revoked = core.revokeStanding(request.params.id, 'console');
      return revoked ? { revoked: revoked.id } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no such standing approval' });
    });

    // Messages held for a configuration that does not allow them: the person lets them go.
    authed.post<{ Params: { plugin: string } }>('/api/held/:plugin/discard', async (request, reply) => {
      const discarded = core.discardHeld(request.params.plugin, 'console');
      return discarded > 0 ? { plugin: request.params.plugin, discarded } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no messages are held for that plugin' });
    });

    authed.get<{ Querystring: Record<string, string | undefined> }>('/api/audit', async (request, reply) => {
      const { group, tool, outcome, correlation, limit } = request.query;
      if (outcome !== undefined && !OUTCOMES.has(outcome as AuditOutcome)) return reply.code(400).send({ code: 'INVALID_INPUT', message: `outcome is one of ${[...OUTCOMES].join(', ')}` });
      const n = Math.min(Math.max(Number(limit ?? 200) || 200, 1), 1000);
      const entries = core.audit.query({ group: group || undefined, correlation: correlation || undefined, outcome: (outcome || undefined) as AuditOutcome | undefined, topic: tool ? `tool.invoke.${tool}` : undefined, last_n: n });
      return { entries };
    });

    authed.get<{ Querystring: { group?: string; since?: string } }>('/api/events', (request, reply) => {
      reply.hijack();
      // The browser's own reconnect sends the newest id it had; `since` is the page's.
      const since = request.headers['last-event-id'] ?? request.query.since;
      if (!live.attach(reply.raw, request.query.group || null, typeof since === 'string' ? since : null)) {
        reply.raw.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'UNAVAILABLE', message: 'too many live views open; close one' }));
      }
    });

    authed.get('/api/agents', async () => {
      const states = new Map((deps.agents?.states.list() ?? []).map((s) => [s.group, s]));
      const tokens = new Map((deps.usage?.() ?? []).map((u) => [u.group, u.tokens]));
      return { agents: Object.keys(core.config.groups).map((group) => ({ group, state: 'stopped', container: null, since: null, last_turn: null, ...states.get(group), tokens_today: tokens.get(group) ?? 0 })) };
    });
    authed.post<{ Params: { group: string } }>('/api/agents/:group/stop', async (request, reply) => {
      if (!deps.agents || !(request.params.group in core.config.groups)) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such group' });
      const stopped = await deps.agents.end(request.params.group, 'stopped from the console', 'console');
      return { group: request.params.group, stopped };
    });

    // What a group's next session will be told of the earlier conversation, and the person's way to clear it.
    authed.get<{ Params: { group: string } }>('/api/conversation/:group', async (request, reply) => {
      if (!deps.conversation || !(request.params.group in core.config.groups)) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such group' });
      return { group: request.params.group, messages: deps.conversation.list(request.params.group), kept_since: new Date(deps.conversation.keptSince()).toISOString(), workspace: deps.agents?.workspaceLabels?.get(request.params.group) ?? null };
    });
    // The person looked at the files a labelled session may have written, and takes them as theirs.
    authed.post<{ Params: { group: string } }>('/api/workspace/:group/reviewed', async (request, reply) => {
      const labels = deps.agents?.workspaceLabels;
      if (!labels || !(request.params.group in core.config.groups)) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such group' });
      const group = request.params.group;
      const was = labels.get(group);
      const reviewed = labels.reviewed(group);
      if (reviewed) core.audit.record({ group, session: null, source: 'console', topic: null, correlation: null, stage: 'agent', outcome: 'ok', reason: `workspace files reviewed by a person: no longer marked as written after external content (since ${was?.since ?? '?'}; ${was?.files.length ?? 0} listed)` });
      return { group, reviewed };
    });
    authed.delete<{ Params: { group: string } }>('/api/conversation/:group', async (request, reply) => {
      if (!deps.conversation || !(request.params.group in core.config.groups)) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such group' });
      const cleared = deps.conversation.clear(request.params.group, 'console', 'console');
      return { group: request.params.group, cleared };
    });

    authed.get<{ Querystring: { days?: string } }>('/api/usage', async (request) => {
      const days = Math.min(Math.max(Number(request.query.days ?? 14) || 14, 1), 90);
      return { days, usage: deps.usageHistory?.(days) ?? [], today: deps.usage?.() ?? [] };
    });

    authed.get('/api/groups', async () => ({
      groups: Object.keys(core.config.groups).map((group) => ({ group, tools: core.toolsOf(group) })),
      // Chats mapped to groups, from each channel plugin's settings (`chats`: id → group).
      chats: Object.entries(core.config.plugins).flatMap(([plugin, settings]) => {
        const chats = (settings as { chats?: unknown } | null)?.chats;
        return chats && typeof chats === 'object' ? Object.entries(chats as Record<string, unknown>).map(([chat, group]) => ({ plugin, chat, group: String(group) })) : [];
      }),
      panels: (deps.panels?.() ?? []).filter((p) => !p.down).map(({ name, title }) => ({ name, title })),
    }));

    authed.get('/api/pairing', async () => ({ pending: core.pairing.list() }));
    authed.post<{ Params: { code: string }; Body: { group?: unknown; create?: unknown } | null }>('/api/pairing/:code/approve', async (request, reply) => answerPairing(core, request.params.code, request.body, 'console', reply));
    authed.post<{ Params: { code: string } }>('/api/pairing/:code/deny', async (request, reply) => refusePairing(core, request.params.code, 'console', reply));

    // A file an agent sent: only what the core checked and kept, never rendered as a page.
    authed.get<{ Params: { id: string } }>('/api/files/:id', async (request, reply) => {
      const file = deps.files?.get(request.params.id);
      if (!file) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such file (files are kept for a while, the oldest go first)' });
      const name = file.ref.name.replace(/[^\w.-]+/g, '_');
      return reply
        .header('content-type', file.ref.type)
        .header('content-disposition', `${file.ref.inline ? 'inline' : 'attachment'}; filename="${name}"`)
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('cache-control', 'private, no-store')
        .send(createReadStream(file.path));
    });

    authed.get('/api/skills', async () => ({ skills: deps.skills?.() ?? [] }));
    authed.get('/api/checks', async () => (deps.checks ? await deps.checks() : { ok: true, checks: [] }));
    // Plugins' connection checks (run in the plugin's own process; the core never sees a password).
    authed.get('/api/connection-checks', async () => ({ checks: core.connections.list() }));
    authed.post<{ Params: { plugin: string } }>('/api/connection-checks/:plugin', async (request, reply) => {
      const run = core.connections.run(request.params.plugin, 'console');
      return run ? await run : reply.code(404).send({ code: 'NOT_FOUND', message: NO_CONNECTION_CHECK });
    });

    if (deps.panels) {
      await registerPanelProxy(authed, deps.panels, (plugin, method, path, status) => {
        const group = new URL(path, 'http://x').searchParams.get('group');
        core.audit.record({ group: group && GROUP_NAME_PATTERN.test(group) ? group : null, session: null, source: 'console', topic: null, correlation: null, stage: 'plugin', outcome: status < 400 ? 'ok' : 'rejected', reason: `${method} ${plugin} page ${path.slice(0, 200)} → ${status}` });
      });
    }
  });
  return live;
}
