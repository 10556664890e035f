// The local admin API: health, metrics, usage, pending confirmations and standing approvals, for the CLI;
// and on the same port the web console (console/console.ts), which has its own login.
// It listens on loopback by default; with a token, every API call needs it as a bearer token.
import { endedMessage } from '../confirm/ended-message.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { answerPairing, refusePairing } from '../pairing/answers.js';
import type { Report } from '../doctor/checks.js';
import { NO_CONNECTION_CHECK, registerConsole, type ConsoleDeps } from '../console/console.js';
import { timingSafeEqual } from 'node:crypto';
import type { Core } from '../core.js';
import type { GroupUsage } from '../llm/budgets.js';

/** What the admin API serves beside the core's own state. */
export interface AdminSources {
  /** Today's model usage and budgets per group (the LLM proxy's). */
  usage?: () => GroupUsage[];
  /** Added to /health (e.g. the agents' runtime). */
  health?: Record<string, unknown>;
  /** The doctor's checks (GET /doctor, the console's Checks page). */
  checks?: () => Promise<Report>;
  /** The web console (needs the token: its login is that token). */
  console?: Omit<ConsoleDeps, 'core' | 'token' | 'usage' | 'checks'>;
}

export async function startAdminApi(core: Core, host: string, port: number, token?: string, sources: AdminSources = {}): Promise<FastifyInstance> {
  // A stop does not wait for open pages and event streams (closeAllConnections).
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024, forceCloseConnections: true });
  if (token && sources.console) await registerConsole(app, { ...sources.console, core, token, usage: sources.usage, checks: sources.checks });
  await app.register(async (api) => routes(api, core, token, sources));
  await app.listen({ host, port });
  return app;
}

/** Every request in `app`'s context needs `Authorization: Bearer <token>`. */
export function requireBearer(app: FastifyInstance, token: string): void {
  const expected = Buffer.from(`Bearer ${token}`);
  app.addHook('onRequest', async (request, reply) => {
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      await reply.code(401).send({ code: 'UNAUTHORIZED', message: 'missing or wrong admin token' });
    }
  });
}

/** The bearer-token API (its own context: the token hook does not apply to the console's routes). */
async function routes(app: FastifyInstance, core: Core, token: string | undefined, sources: AdminSources): Promise<void> {
  if (token) requireBearer(app, token);
  app.get('/health', async (_request, reply) => {
    // An unwritable audit log is not ok: tool calls are refused until it recovers.
    const audit = core.audit.health();
    if (!audit.ok) void reply.code(503);
    return { status: audit.ok ? 'ok' : 'degraded', plugins: core.catalog.health(), sessions: core.sessions.all().length, audit, ...sources.health };
  });
  app.get('/confirmations', async () => ({ pending: core.confirmations.list() }));
  // An approval may also stand: `{"allow_hours": N}` allows this tool with these exact
  // arguments in this group for N hours.
  const answer = (approve: boolean) => async (request: { params: { id: string }; body?: unknown }, reply: { code(n: number): { send(b: unknown): unknown } }) => {
    const { allow_hours: hours, hash } = (request.body as { allow_hours?: unknown; hash?: unknown } | undefined) ?? {};
    if (hours !== undefined && typeof hours !== 'number') return reply.code(400).send({ code: 'INVALID_INPUT', message: 'allow_hours must be a number of hours' });
    if (hash !== undefined && typeof hash !== 'string') return reply.code(400).send({ code: 'INVALID_INPUT', message: 'hash must be the hex sha256 of the description shown' });
    // Optional: `{"hash": "<description.hash>"}` binds the answer to what was looked at.
    const { answered, stale, standing } = core.answerConfirmation(request.params.id, approve, 'admin-api', hours, hash);
    if (stale) return reply.code(409).send({ code: 'STALE', message: 'the hash is not that of the pending request\'s description: nothing was decided' });
    if (!answered) return reply.code(404).send({ code: 'NOT_FOUND', message: endedMessage(core.confirmations.status(request.params.id)) });
    return { id: request.params.id, decision: approve ? 'approved' : 'denied', ...(standing ? { standing } : {}) };
  };
  app.post<{ Params: { id: string } }>('/confirmations/:id/approve', answer(true));
  app.post<{ Params: { id: string } }>('/confirmations/:id/deny', answer(false));
  app.get('/standing-approvals', async () => ({ standing: core.standing.list() }));
  app.post<{ Body: { group?: unknown; tool?: unknown; arguments?: unknown; hours?: unknown; uses_per_hour?: unknown } }>('/standing-approvals', async (request, reply) => {
    const { group, tool, arguments: args, hours, uses_per_hour: uses } = request.body ?? {};
    if (typeof group !== 'string' || typeof tool !== 'string' || typeof hours !== 'number' || typeof args !== 'object' || args === null || Array.isArray(args) || (uses !== undefined && typeof uses !== 'number')) {
      return reply.code(400).send({ code: 'INVALID_INPUT', message: 'needs {"group": string, "tool": string, "arguments": object, "hours": number, "uses_per_hour"?: number}' });
    }
    const granted = await core.grantStandingDescribed({ group, tool, arguments: args as Record<string, unknown>, hours, by: 'admin-api', ...(uses !== undefined ? { uses_per_hour: uses } : {}) });
    return 'id' in granted ? reply.code(201).send(granted) : reply.code(granted.code === 'UNAVAILABLE' ? 503 : 400).send(granted);
  });
  app.delete<{ Params: { id: string } }>('/standing-approvals/:id', async (request, reply) => {
    const revoked = core.revokeStanding(request.params.id, 'admin-api');
    return revoked ? { revoked: revoked.id } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no such standing approval' });
  });
  app.get('/pairing', async () => ({ pending: core.pairing.list() }));
  app.post<{ Params: { code: string }; Body: { group?: unknown; create?: unknown } | null }>('/pairing/:code/approve', async (request, reply) => answerPairing(core, request.params.code, request.body, 'admin-api', reply));
  app.post<{ Params: { code: string } }>('/pairing/:code/deny', async (request, reply) => refusePairing(core, request.params.code, 'admin-api', reply));
  // Prometheus's text format, behind the admin token like everything here.
  app.get('/metrics', async (_request, reply) => reply.type(core.metrics.contentType).send(await core.metrics.text()));
  const usage = sources.usage;
  if (usage) app.get('/usage', async () => ({ groups: usage() }));
  const checks = sources.checks;
  if (checks) app.get('/doctor', async () => checks());
  // Plugins' connection checks: what the console's Checks page runs.
  app.get('/connection-checks', async () => ({ checks: core.connections.list() }));
  app.post<{ Params: { plugin: string } }>('/connection-checks/:plugin', async (request, reply) => {
    const run = core.connections.run(request.params.plugin, 'admin-api');
    return run ? await run : reply.code(404).send({ code: 'NOT_FOUND', message: NO_CONNECTION_CHECK });
  });
}
