// The six stages in order, each decision written to the audit log, every outcome sent
// back through the response path. Nothing thrown escapes: a bug becomes PLUGIN_ERROR.
import type { AuditInput, AuditLog } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import { parseWire } from '../boundary/wire.js';
import type { Confirmations } from '../confirm/confirmations.js';
import { WaitingCalls, type CallHandle, type Send } from '../confirm/waiting-calls.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ToolEntry } from '../plugins/discovery.js';
import type { RequestEnvelope } from '../protocol/envelope.js';
import { pipelineError, PLUGIN_ERROR_MESSAGE, type ErrorPayload } from '../protocol/errors.js';
import { buildResponse, type Answer, type ResponseContext } from '../response/respond.js';
import type { Sanitizer } from '../response/sanitize.js';
import type { GroupAuthorizer } from './authorize.js';
import { confirm } from './confirm.js';
import { constructEnvelope } from './construct-envelope.js';
import type { RateLimiter } from './rate-limit.js';
import type { RecentRequests } from './recent-requests.js';
import { route, type RouteDeps } from './route.js';
import { validatePayload } from './validate-payload.js';
import { validateTopic } from './validate-topic.js';

export interface PipelineDeps {
  catalog: ToolCatalog;
  authorizer: GroupAuthorizer;
  limiter: RateLimiter;
  confirmations: Confirmations;
  audit: AuditLog;
  sanitize: Sanitizer;
  route: RouteDeps;
  recent: RecentRequests<Answer>;
  /** High-risk calls waiting for a person: joins retries, keeps callers informed. */
  calls?: WaitingCalls;
}

/**
 * Processes one message from a session's socket and returns the reply frame. `send`
 * reaches the same caller before that (the interim "pending confirmation" frames).
 */
export async function runPipeline(frames: Buffer[], session: Session, deps: PipelineDeps, send?: Send): Promise<Buffer> {
  const startedAt = performance.now();
  const ctx: ResponseContext = { group: session.group, session: session.id, topic: '', correlation: null, startedAt };
  const answer = await decide(frames, session, deps, ctx, send).catch((err: unknown): Answer => {
    note(deps.audit, ctx, 'core', 'error', { reason: 'pipeline failure', detail: String((err as Error)?.stack ?? err) });
    return { source: 'core', error: pipelineError('PLUGIN_ERROR', PLUGIN_ERROR_MESSAGE, false) };
  });
  const reply = buildResponse(ctx, answer, deps.sanitize, deps.audit);
  if (ctx.correlation !== null) deps.recent.weigh(recentKey(ctx.session, ctx.correlation), reply.length);
  return reply;
}

function recentKey(session: string, correlation: string): string {
  return `${session} ${correlation}`;
}

/** Audits one stage decision for the request in `ctx`; the source is its session unless `more` names another. */
function note(audit: AuditLog, ctx: ResponseContext, stage: AuditInput['stage'], outcome: AuditInput['outcome'], more?: Partial<Pick<AuditInput, 'source' | 'reason' | 'code' | 'detail'>>): void {
  audit.record({
    group: ctx.group,
    session: ctx.session,
    source: more?.source ?? ctx.session,
    topic: ctx.topic || null,
    correlation: ctx.correlation,
    stage,
    outcome,
    reason: more?.reason,
    code: more?.code,
    detail: more?.detail,
  });
}

/** Audits a refusal at `stage` and returns it as the answer. */
function reject(audit: AuditLog, ctx: ResponseContext, stage: AuditInput['stage'], error: ErrorPayload): Answer {
  note(audit, ctx, stage, 'rejected', { reason: `STAGE ${error.stage ?? 6}: ${error.message}`, code: error.code });
  return { source: 'core', error };
}

function pass(audit: AuditLog, ctx: ResponseContext, stage: AuditInput['stage']): void {
  note(audit, ctx, stage, 'passed');
}

async function decide(frames: Buffer[], session: Session, deps: PipelineDeps, ctx: ResponseContext, send?: Send): Promise<Answer> {
  const { audit } = deps;

  // Stage 1: construct the envelope from session state.
  const body = frames.filter((f) => f.length > 0);
  if (body.length !== 1) {
    return reject(audit, ctx, 'envelope', pipelineError('VALIDATION_FAILED', 'Request must be exactly one JSON frame', false, { stage: 1, field: 'message' }));
  }
  const wire = parseWire(body[0]);
  if (!wire.ok) {
    ctx.correlation = wire.correlation;
    ctx.topic = wire.topic;
    return reject(audit, ctx, 'envelope', wire.error);
  }
  ctx.topic = wire.message.topic;
  ctx.correlation = wire.message.correlation;
  const key = recentKey(session.id, wire.message.correlation);
  const now = Date.now();
  const earlier = deps.recent.get(key, now);
  if (earlier) {
    note(audit, ctx, 'envelope', 'passed', { reason: 'repeat of an earlier request (resent after a reconnect): answered once' });
    if (send) deps.calls?.rejoin(key, { correlation: wire.message.correlation, send });
    return earlier;
  }
  const envelope = constructEnvelope(wire.message, session);
  pass(audit, ctx, 'envelope');
  const answer = validateAndRoute(envelope, session, deps, ctx, send);
  deps.recent.set(key, answer);
  return answer;
}

async function validateAndRoute(envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, send?: Send): Promise<Answer> {
  const { audit } = deps;

  // Stage 2: the topic names a known tool.
  const topic = validateTopic(envelope.topic, deps.catalog);
  if ('error' in topic) return reject(audit, ctx, 'topic', topic.error);
  const { tool } = topic;
  pass(audit, ctx, 'topic');

  // Stage 3: arguments match the tool's schema.
  const invalid = validatePayload(tool, envelope.payload.arguments);
  if (invalid) return reject(audit, ctx, 'payload', invalid);
  pass(audit, ctx, 'payload');

  // Stage 4: the group may use the tool, and the session is within its rate.
  if (!deps.authorizer.mayUse(session.group, tool)) {
    return reject(audit, ctx, 'authorize', pipelineError('UNAUTHORIZED', `Group "${session.group}" may not use ${tool.name}`, false, { stage: 4 }));
  }
  const rate = deps.limiter.check(session.id, tool.name);
  if (!rate.ok) {
    const message = `Rate limit exceeded for ${tool.name} (${rate.limit.per_minute} requests/minute)`;
    return reject(audit, ctx, 'rate_limit', pipelineError('RATE_LIMITED', message, true, { stage: 4, retry_after: rate.retryAfter }));
  }
  pass(audit, ctx, 'authorize');

  if (tool.risk_level === 'high' && deps.calls && send) {
    const caller = { correlation: envelope.correlation, send };
    const joinKey = WaitingCalls.joinKey(session.id, tool.name, envelope.payload.arguments);
    const joined = deps.calls.join(joinKey, recentKey(session.id, envelope.correlation), caller);
    if (joined) {
      note(audit, ctx, 'confirm', 'pending', { reason: 'same tool and arguments as a request already waiting: joined it (one prompt, one action)' });
      return joined;
    }
    const calls = deps.calls;
    return calls.run(joinKey, recentKey(session.id, envelope.correlation), caller, (handle) =>
      confirmAndRoute(tool, envelope, session, deps, ctx, { handle, keepaliveMs: calls.keepaliveMs }),
    );
  }
  return confirmAndRoute(tool, envelope, session, deps, ctx);
}

async function confirmAndRoute(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, call?: { handle: CallHandle; keepaliveMs: number }): Promise<Answer> {
  const { audit } = deps;
  // Stage 5: high-risk tools wait for a person.
  const denied = await confirm(tool, envelope, session, deps.confirmations, (id) =>
    note(audit, ctx, 'confirm', 'pending', { reason: `awaiting user confirmation ${id}` }),
  call);
  if (denied) return reject(audit, ctx, 'confirm', denied);
  if (tool.risk_level === 'high') pass(audit, ctx, 'confirm');

  // Stage 6: route to the owner.
  note(audit, ctx, 'route', 'routed', { reason: `to ${tool.owner}` });
  const routed = await route(tool, envelope, session, deps.route);
  if ('error' in routed) {
    note(audit, ctx, 'handler', 'error', {
      source: tool.owner,
      code: routed.handler?.code ?? routed.error.code,
      reason: routed.handler?.message ?? routed.error.message,
      detail: routed.detail,
    });
    return { source: routed.source, error: routed.error };
  }
  return routed;
}
