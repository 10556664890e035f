// The web console, served by the admin API's fastify on its port (127.0.0.1 by default).
// Only the login page and its two files are public. Everything else (pages, assets, the
// JSON API under /api, the event stream, plugin panels under /plugins/<name>/) needs a
// session: an HttpOnly, SameSite=Strict cookie that only the admin token makes. Every
// state change also needs the session's CSRF token, and the CSP allows this origin only.
// The console decides nothing itself: it calls the same core methods as the admin API.
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import helmet from '@fastify/helmet';
import rateLimit from '@fastify/rate-limit';
import session from '@fastify/session';
import fastifyStatic from '@fastify/static';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentStates } from '../agents/agent-states.js';
import type { AuditOutcome } from '../audit/audit-log.js';
import type { Core } from '../core.js';
import type { GroupUsage } from '../llm/budgets.js';
import type { DayUsage } from '../llm/usage-store.js';
import { APP_VERSION } from '../version.js';
import { GROUP_NAME_PATTERN } from '../boundary/session-table.js';
import type { Report } from '../doctor/checks.js';
import { DiskUsage } from './disk-usage.js';
import { LiveEvents } from './live-events.js';
import { registerPanelProxy, type Panel } from './panel-proxy.js';
import { answerPairing, refusePairing } from '../pairing/answers.js';

declare module 'fastify' {
  interface Session {
    user?: 'admin';
  }
}

export interface ConsoleDeps {
  core: Core;
  token: string;
  agents?: { states: AgentStates; retire(group: string): Promise<void> };
  usage?: () => GroupUsage[];
  usageHistory?: (days: number) => DayUsage[];
  /** Folders whose size the overview shows (logs, workspaces). */
  folders?: { name: string; path: string }[];
  /** Plugins with a panel, and where their sockets are. */
  panels?: () => Panel[];
  /** The first-run checks (doctor). */
  checks?: () => Promise<Report>;
  /** Set the cookie's Secure flag (behind an https proxy). */
  secureCookie?: boolean;
  /** Login attempts per client per minute (default 10). */
  loginPerMinute?: number;
}

const SESSION_HOURS = 12;
const MAX_SESSIONS = 100;
const LOGIN_PER_MINUTE = 10;
const UI_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../../core/src/console/ui');
const VENDOR_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../../node_modules/htm/preact');
const OUTCOMES = new Set<AuditOutcome>(['passed', 'routed', 'rejected', 'sanitized', 'error', 'ok', 'dropped', 'pending']);

/** The session store: a Map that forgets its oldest entry past MAX_SESSIONS (each login makes one). */
class BoundedMap<K, V> extends Map<K, V> {
  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= MAX_SESSIONS) this.delete(this.keys().next().value as K);
    return super.set(key, value);
  }
}

function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** fastify's and its plugins' errors as the console's `{code, message}`. */
function errorBody(err: FastifyError): { status: number; body: { code: string; message: string } } {
  const status = err.statusCode ?? 500;
  if (err.code?.startsWith('FST_CSRF')) return { status: 403, body: { code: 'CSRF_REFUSED', message: 'missing or wrong CSRF token: reload the page' } };
  if (status === 429) return { status, body: { code: 'RATE_LIMITED', message: 'too many attempts: wait a minute' } };
  if (status < 500) return { status, body: { code: 'INVALID_INPUT', message: err.message } };
  return { status, body: { code: 'INTERNAL_ERROR', message: 'the console failed to answer; see the core log' } };
}

export async function registerConsole(app: FastifyInstance, deps: ConsoleDeps): Promise<LiveEvents> {
  const { core } = deps;
  const live = new LiveEvents();
  core.audit.on('entry', (entry) => live.publish({ type: 'audit', ...entry }));
  deps.agents?.states.on('change', (state) => live.publish({ type: 'agent', ...state }));
  // Before the server closes: an open stream would otherwise hold the close up.
  app.addHook('preClose', async () => live.close());
  const disk = new DiskUsage(deps.folders ?? []);

  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    // Plain http on loopback: HSTS would pin a name to https that nothing serves.
    strictTransportSecurity: deps.secureCookie ? undefined : false,
  });
  await app.register(cookie);
  await app.register(session, {
    secret: randomBytes(32).toString('base64url'),
    cookieName: 'carapace_session',
    saveUninitialized: false,
    store: new session.MemoryStore(new BoundedMap()),
    cookie: { httpOnly: true, sameSite: 'strict', secure: deps.secureCookie ?? false, path: '/', maxAge: SESSION_HOURS * 3_600_000 },
  });
  await app.register(csrf, { sessionPlugin: '@fastify/session' });
  await app.register(rateLimit, { global: false });
  app.setErrorHandler((err: FastifyError, _request, reply) => {
    const { status, body } = errorBody(err);
    void reply.code(status).send(body);
  });

  // ---- public: the login page --------------------------------------------------------
  await app.register(fastifyStatic, { root: join(UI_DIR, 'public'), prefix: '/public/', index: false });
  app.get('/login', (_request, reply) => reply.sendFile('login.html', join(UI_DIR, 'public')));
  app.post('/login', { config: { rateLimit: { max: deps.loginPerMinute ?? LOGIN_PER_MINUTE, timeWindow: 60_000 } } }, async (request, reply) => {
    // JSON only: a cross-site form cannot send it without a CORS preflight, which fails here.
    if (!request.headers['content-type']?.startsWith('application/json')) {
      return reply.code(415).send({ code: 'INVALID_INPUT', message: 'send {"token": "..."} as application/json' });
    }
    const given = (request.body as { token?: unknown } | null)?.token;
    const audit = (outcome: 'ok' | 'rejected', reason: string) =>
      core.audit.record({ group: null, session: null, source: 'console', topic: null, correlation: null, stage: 'core', outcome, reason: `${reason} from ${request.ip}` });
    if (!sameToken(given, deps.token)) {
      audit('rejected', 'console login refused');
      return reply.code(401).send({ code: 'UNAUTHORIZED', message: 'wrong admin token' });
    }
    await request.session.regenerate();
    request.session.set('user', 'admin');
    audit('ok', 'console login');
    return reply.code(204).send();
  });

  // ---- everything else: session, then CSRF on state changes ---------------------------
  await app.register(async (authed) => {
    authed.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (request.session.get('user') === 'admin') return;
      const wantsPage = request.method === 'GET' && !request.url.startsWith('/api/') && (request.headers.accept ?? '').includes('text/html');
      if (wantsPage) return reply.redirect('/login', 303);
      return reply.code(401).send({ code: 'UNAUTHORIZED', message: 'log in first' });
    });
    authed.addHook('onRequest', (request, reply, done) => {
      if (request.method === 'GET' || request.method === 'HEAD') return done();
      authed.csrfProtection(request, reply, done);
    });

    await authed.register(fastifyStatic, { root: join(UI_DIR, 'app'), prefix: '/assets/', index: false, decorateReply: false });
    authed.get('/assets/vendor/preact-htm.js', (_request, reply) => reply.sendFile('standalone.module.js', VENDOR_DIR));
    authed.get('/', (_request, reply) => reply.header('cache-control', 'no-store').sendFile('index.html', join(UI_DIR, 'app')));
    authed.get('/api/csrf', async (_request, reply) => ({ token: reply.generateCsrf() }));
    authed.post('/logout', async (request, reply) => {
      await request.session.destroy();
      return reply.code(204).send();
    });

    authed.get('/api/overview', async () => {
      return {
        version: APP_VERSION,
        uptime_s: Math.round(process.uptime()),
        plugin_host: core.pluginHostConnected,
        plugins: core.catalog.states(),
        agents: deps.agents?.states.list() ?? [],
        audit: core.audit.health(),
        disk: await disk.read(),
        budgets: deps.usage?.() ?? [],
        pending_confirmations: core.confirmations.list().length,
        live_streams: { open: live.open, dropped: live.dropped },
      };
    });

    authed.get('/api/confirmations', async () => ({ pending: core.confirmations.list(), standing: core.standing.list() }));
    const answer = (approve: boolean) => async (request: FastifyRequest<{ Params: { id: string }; Body: { allow_hours?: unknown } | null }>, reply: FastifyReply) => {
      const hours = request.body?.allow_hours;
      if (hours !== undefined && typeof hours !== 'number') return reply.code(400).send({ code: 'INVALID_INPUT', message: 'allow_hours must be a number of hours' });
      const { answered, standing } = core.answerConfirmation(request.params.id, approve, 'console', hours);
      if (!answered) return reply.code(404).send({ code: 'NOT_FOUND', message: 'no such pending confirmation (answered or expired)' });
      return { id: request.params.id, decision: approve ? 'approved' : 'denied', ...(standing ? { standing } : {}) };
    };
    authed.post('/api/confirmations/:id/approve', answer(true));
    authed.post('/api/confirmations/:id/deny', answer(false));
    authed.delete<{ Params: { id: string } }>('/api/standing/:id', async (request, reply) => {
      const revoked = core.revokeStanding(request.params.id, 'console');
      return revoked ? { revoked: revoked.id } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no such standing approval' });
    });

    authed.get<{ Querystring: Record<string, string | undefined> }>('/api/audit', async (request, reply) => {
      const { group, tool, outcome, correlation, limit } = request.query;
      if (outcome !== undefined && !OUTCOMES.has(outcome as AuditOutcome)) return reply.code(400).send({ code: 'INVALID_INPUT', message: `outcome is one of ${[...OUTCOMES].join(', ')}` });
      const n = Math.min(Math.max(Number(limit ?? 200) || 200, 1), 1000);
      const entries = core.audit.query({ group: group || undefined, correlation: correlation || undefined, outcome: (outcome || undefined) as AuditOutcome | undefined, topic: tool ? `tool.invoke.${tool}` : undefined, last_n: n });
      return { entries };
    });

    authed.get<{ Querystring: { group?: string } }>('/api/events', (request, reply) => {
      reply.hijack();
      if (!live.attach(reply.raw, request.query.group || null)) {
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
      await deps.agents.retire(request.params.group);
      core.audit.record({ group: request.params.group, session: null, source: 'console', topic: null, correlation: null, stage: 'agent', outcome: 'ok', reason: 'agent stopped from the console' });
      return { stopped: request.params.group };
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
      panels: (deps.panels?.() ?? []).map(({ name, title }) => ({ name, title })),
    }));

    authed.get('/api/pairing', async () => ({ pending: core.pairing.list() }));
    authed.post<{ Params: { code: string }; Body: { group?: unknown; create?: unknown } | null }>('/api/pairing/:code/approve', async (request, reply) => answerPairing(core, request.params.code, request.body, 'console', reply));
    authed.post<{ Params: { code: string } }>('/api/pairing/:code/deny', async (request, reply) => refusePairing(core, request.params.code, 'console', reply));

    authed.get('/api/checks', async () => (deps.checks ? await deps.checks() : { ok: true, checks: [] }));

    if (deps.panels) {
      await registerPanelProxy(authed, deps.panels, (plugin, method, path, status) => {
        const group = new URL(path, 'http://x').searchParams.get('group');
        core.audit.record({ group: group && GROUP_NAME_PATTERN.test(group) ? group : null, session: null, source: 'console', topic: null, correlation: null, stage: 'plugin', outcome: status < 400 ? 'ok' : 'rejected', reason: `${method} ${plugin} page ${path.slice(0, 200)} → ${status}` });
      });
    }
  });
  return live;
}
