// The local admin API: health, metrics, usage and pending confirmations, for the dashboard and the CLI.
// It listens on loopback by default; with CARAPACE_ADMIN_TOKEN set, every call needs it.
import Fastify, { type FastifyInstance } from 'fastify';
import { timingSafeEqual } from 'node:crypto';
import type { Core } from '../core.js';
import type { GroupUsage } from '../llm/budgets.js';

/** What the admin API serves beside the core's own state. */
export interface AdminSources {
  /** Today's model usage and budgets per group (the LLM proxy's). */
  usage?: () => GroupUsage[];
}

export async function startAdminApi(core: Core, host: string, port: number, token?: string, sources: AdminSources = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 });
  if (token) {
    const expected = Buffer.from(`Bearer ${token}`);
    app.addHook('onRequest', async (request, reply) => {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        await reply.code(401).send({ code: 'UNAUTHORIZED', message: 'missing or wrong admin token' });
      }
    });
  }
  app.get('/health', async (_request, reply) => {
    // An unwritable audit log is not ok: tool calls are refused until it recovers.
    const audit = core.audit.health();
    if (!audit.ok) void reply.code(503);
    return { status: audit.ok ? 'ok' : 'degraded', plugins: core.catalog.health(), sessions: core.sessions.all().length, audit };
  });
  app.get('/confirmations', async () => ({ pending: core.confirmations.list() }));
  const answer = (approve: boolean) => async (request: { params: { id: string } }, reply: { code(n: number): { send(b: unknown): unknown } }) => {
    const ok = core.confirmations.resolve(request.params.id, approve, 'admin-api');
    return ok ? { id: request.params.id, decision: approve ? 'approved' : 'denied' } : reply.code(404).send({ code: 'NOT_FOUND', message: 'no such pending confirmation' });
  };
  app.post<{ Params: { id: string } }>('/confirmations/:id/approve', answer(true));
  app.post<{ Params: { id: string } }>('/confirmations/:id/deny', answer(false));
  // Prometheus's text format, behind the admin token like everything here.
  app.get('/metrics', async (_request, reply) => reply.type(core.metrics.contentType).send(await core.metrics.text()));
  const usage = sources.usage;
  if (usage) app.get('/usage', async () => ({ groups: usage() }));
  await app.listen({ host, port });
  return app;
}
