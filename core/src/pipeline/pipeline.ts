// The six stages in order, each decision written to the audit log, every outcome sent
// back through the response path. Nothing thrown escapes: a bug becomes PLUGIN_ERROR.
import type { AuditInput, AuditLog } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import { parseWire } from '../boundary/wire.js';
import { stateHash, type CallState } from '../confirm/call-state.js';
import type { Confirmations } from '../confirm/confirmations.js';
import { WaitingCalls, type CallHandle, type Send } from '../confirm/waiting-calls.js';
import type { StandingApprovals } from '../confirm/standing-approvals.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { TOOL_TOPIC_PREFIX, type JsonObject, type RequestEnvelope } from '../protocol/envelope.js';
import { pipelineError, PLUGIN_ERROR_MESSAGE, ToolFailure, type ErrorPayload } from '../protocol/errors.js';
import { buildResponse, type Answer, type ResponseContext } from '../response/respond.js';
import type { Sanitizer } from '../response/sanitize.js';
import type { GroupAuthorizer } from './authorize.js';
import { confirm, refuseHidden, riskOf } from './confirm.js';
import { constructEnvelope } from './construct-envelope.js';
import type { RateLimiter } from './rate-limit.js';
import type { RecentRequests } from './recent-requests.js';
import { RequestTrail, type AuditRecorder } from './request-trail.js';
import { route, type RouteDeps } from './route.js';
import { validatePayload } from './validate-payload.js';
import { validateTopic } from './validate-topic.js';
import { attachFiles, type AttachDeps } from '../files/attach-files.js';
import { PROPOSE_WRITE_NAME } from '../proposed-writes/proposed-change.js';
import { forgetTaken, takeWorkspaceFiles } from '../proposed-writes/take-workspace-files.js';

export interface PipelineDeps {
  metrics?: Pick<Metrics, 'request'>;
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
  /** What a high-risk call of a `describe` tool refers to, from its plugin (call-state.ts). */
  describeState?: (tool: ToolEntry, session: Session, args: JsonObject) => Promise<CallState>;
  /** A person's "allow exactly this, here, for a while": such a call asks nobody. */
  standing?: Pick<StandingApprovals, 'use'>;
  /** Reads and keeps the files a tool's file arguments name (files/attach-files.ts). */
  files?: AttachDeps;
  /** Tools whose high-risk calls may hold tag characters and bidi controls (`confirmations.allow_hidden_characters`). */
  allowHiddenCharacters?: ReadonlySet<string>;
  /** Tools with an external effect that a session which read external content may call unasked (`confirmations.allow_after_external_content`). */
  allowAfterExternal?: ReadonlySet<string>;
  /**
   * A tool call's handler succeeded, once per call (a resend's cached answer is not another):
   * the agent manager learns that a reply reached a person, the conversation keeps it (core.ts).
   * `args` are the arguments the handler got (validated, files attached).
   */
  succeeded?: (session: Session, tool: string, args: JsonObject, result: unknown) => void;
  /**
   * A call of a known tool ended in an error (refused at any stage, or its handler failed),
   * once per call: the agent manager can tell the person what failed when a reply did not
   * reach them (core.ts). `args` as the agent gave them.
   */
  failed?: (session: Session, tool: string, args: JsonObject, error: ErrorPayload) => void;
  /** A plugin's section of carapace.json, for tools whose risk a recipient list may lower (untrusted-input.ts). */
  pluginConfig?: (plugin: string) => JsonObject | undefined;
}

/**
 * Processes one message from a session's socket and returns the reply frame. `send`
 * reaches the same caller before that (the interim "pending confirmation" frames).
 */
export async function runPipeline(frames: Buffer[], session: Session, deps: PipelineDeps, send?: Send): Promise<string> {
  const startedAt = performance.now();
  const ctx: ResponseContext = { group: session.group, session: session.id, topic: '', correlation: null, startedAt };
  const trail = new RequestTrail(deps.audit, session.group, session.id);
  const answer = await decide(frames, session, deps, ctx, trail, send).catch((err: unknown): Answer => {
    trail.proceed();
    note(trail, ctx, 'core', 'error', { reason: 'pipeline failure', detail: String((err as Error)?.stack ?? err) });
    return { source: 'core', error: pipelineError('PLUGIN_ERROR', PLUGIN_ERROR_MESSAGE, false) };
  });
  const reply = buildResponse(ctx, answer, deps.sanitize, trail);
  trail.finish();
  if (ctx.correlation !== null) deps.recent.weigh(recentKey(ctx.session, ctx.correlation), Buffer.byteLength(reply));
  const tool = ctx.topic.startsWith(TOOL_TOPIC_PREFIX) ? (deps.catalog.lookup(ctx.topic.slice(TOOL_TOPIC_PREFIX.length))?.name ?? null) : null;
  deps.metrics?.request(tool, 'error' in answer ? answer.error.code : 'ok', (performance.now() - startedAt) / 1000);
  return reply;
}

/** Frames up to this size are parsed for the correlation a refusal must carry; bigger ones are not worth it. */
const REFUSAL_PARSE_LIMIT = 64 * 1024;

/**
 * The answer to a frame the session guard refused before stage 1: RATE_LIMITED, retriable,
 * through the usual response path. Cheap on purpose (small frames parsed for the
 * correlation only); refusals are strikes, so a session gets only so many.
 */
export function refuseOverBudget(frames: Buffer[], session: Session, retryAfter: number, why: 'rate' | 'in_flight', deps: Pick<PipelineDeps, 'audit' | 'sanitize' | 'metrics'>): string {
  const ctx: ResponseContext = { group: session.group, session: session.id, topic: '', correlation: null, startedAt: performance.now() };
  const body = frames.filter((f) => f.length > 0);
  if (body.length === 1 && body[0].length <= REFUSAL_PARSE_LIMIT) {
    const wire = parseWire(body[0]);
    ctx.correlation = wire.ok ? wire.message.correlation : wire.correlation;
    ctx.topic = wire.ok ? wire.message.topic : wire.topic;
  }
  const message = why === 'rate' ? 'Too many requests from this session' : 'Too many requests in flight for this session';
  // A refusal like any other rejection: summarised when it repeats.
  const trail = new RequestTrail(deps.audit, session.group, session.id);
  const answer = reject(trail, ctx, 'rate_limit', pipelineError('RATE_LIMITED', message, true, { stage: 1, retry_after: retryAfter }));
  const reply = buildResponse(ctx, answer, deps.sanitize, trail);
  trail.finish();
  deps.metrics?.request(null, 'RATE_LIMITED', (performance.now() - ctx.startedAt) / 1000);
  return reply;
}

function recentKey(session: string, correlation: string): string {
  return `${session} ${correlation}`;
}

/** Audits one stage decision for the request in `ctx`; the source is its session unless `more` names another. */
function note(audit: AuditRecorder, ctx: ResponseContext, stage: AuditInput['stage'], outcome: AuditInput['outcome'], more?: Partial<Pick<AuditInput, 'source' | 'reason' | 'code' | 'detail'>>): void {
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
function reject(audit: RequestTrail, ctx: ResponseContext, stage: AuditInput['stage'], error: ErrorPayload, detail?: string): Answer {
  note(audit, ctx, stage, 'rejected', { reason: `STAGE ${error.stage ?? 6}: ${error.message}`, code: error.code, ...(detail ? { detail } : {}) });
  audit.endsAt(stage, error.code);
  return { source: 'core', error };
}

function pass(audit: AuditRecorder, ctx: ResponseContext, stage: AuditInput['stage']): void {
  note(audit, ctx, stage, 'passed');
}

async function decide(frames: Buffer[], session: Session, deps: PipelineDeps, ctx: ResponseContext, audit: RequestTrail, send?: Send): Promise<Answer> {

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
    // The first answer is audited in full; a flood of repeats of it is summarised.
    audit.endsAt('envelope', 'REPEAT');
    if (send) deps.calls?.rejoin(key, { correlation: wire.message.correlation, send });
    return earlier;
  }
  const handle = async (): Promise<Answer> => {
    const envelope = constructEnvelope(wire.message, session);
    pass(audit, ctx, 'envelope');
    const answer = await validateAndRoute(envelope, session, deps, ctx, audit, send);
    const tool = 'error' in answer && envelope.topic.startsWith(TOOL_TOPIC_PREFIX) ? deps.catalog.lookup(envelope.topic.slice(TOOL_TOPIC_PREFIX.length)) : undefined;
    if (tool && 'error' in answer) deps.failed?.(session, tool.name, envelope.payload.arguments, answer.error);
    return answer;
  };
  // A check that may label the session is still running (agents/agent-launcher.ts): the
  // request is built only after it, and resends join this one answer meanwhile.
  const answer = session.labelCheck ? session.labelCheck.then(handle) : handle();
  deps.recent.set(key, answer);
  return answer;
}

async function validateAndRoute(envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, audit: RequestTrail, send?: Send): Promise<Answer> {

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
  audit.proceed();
  const unaudited = auditUnavailable(tool, deps.audit);
  if (unaudited) return reject(audit, ctx, 'route', unaudited);
  // Files a proposal takes from the workspace are read and kept now: the person is asked about those bytes.
  if (tool.owner === 'core' && tool.name === PROPOSE_WRITE_NAME) {
    const taken = await takeWorkspaceFiles(envelope.payload.arguments, session, deps.files);
    if (taken instanceof ToolFailure) return reject(audit, ctx, 'confirm', taken.error);
    if (taken !== envelope.payload.arguments) {
      const withTaken = { ...envelope, payload: { ...envelope.payload, arguments: taken as RequestEnvelope['payload']['arguments'] } };
      let answer: Answer | undefined;
      try {
        answer = await askAndRoute(tool, withTaken, session, deps, ctx, audit, send);
        return answer;
      } finally {
        // A proposal that wrote nothing (refused, answered no, expired, failed) keeps nothing.
        if (!answer || 'error' in answer) forgetTaken(taken.files, deps.files);
      }
    }
  }
  return askAndRoute(tool, envelope, session, deps, ctx, audit, send);
}

/** Stage 5 (a person, a standing approval, or nobody for a low-risk call), then stage 6. */
async function askAndRoute(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, audit: RequestTrail, send?: Send): Promise<Answer> {
  // Decided once: a person is asked (or not) for the risk the call had when it arrived.
  const risk = riskNow(tool, envelope, session, deps);
  const high = risk === 'high';
  // Stage 5 first refuses what no person could check, standing approval or not.
  const hidden = high ? refuseHidden(tool, envelope.payload.arguments, deps.allowHiddenCharacters ?? new Set()) : null;
  if (hidden) return reject(audit, ctx, 'confirm', hidden);
  // What the call refers to on the host (its plugin says): shown to the person, and an
  // approval holds only while it stays the same.
  const state = high && tool.describe && deps.describeState ? await deps.describeState(tool, session, envelope.payload.arguments) : null;
  const standing = high ? deps.standing?.use(session.group, tool.name, envelope.payload.arguments, stateHash(state)) : null;
  if (standing && 'used' in standing) {
    const { id, created_by, expires_at, uses_per_hour } = standing.used;
    note(audit, ctx, 'confirm', 'passed', { reason: `standing approval ${id} by ${created_by}, until ${expires_at} (${uses_per_hour} use${uses_per_hour === 1 ? '' : 's'} an hour)` });
    return routeToOwner(tool, envelope, session, deps, ctx, audit, send);
  }
  if (standing && 'spent' in standing) note(audit, ctx, 'confirm', 'pending', { reason: `standing approval ${standing.spent.id} has no use left this hour (${standing.spent.uses_per_hour} an hour): a person is asked` });
  if (standing && 'changed' in standing) note(audit, ctx, 'confirm', 'pending', { reason: `standing approval ${standing.changed.id} was given when the call referred to something else: a person is asked` });
  if (high && deps.calls && send) {
    const caller = { correlation: envelope.correlation, send };
    const joinKey = WaitingCalls.joinKey(session.id, tool.name, envelope.payload.arguments);
    const joined = deps.calls.join(joinKey, recentKey(session.id, envelope.correlation), caller);
    if (joined) {
      note(audit, ctx, 'confirm', 'pending', { reason: 'same tool and arguments as a request already waiting: joined it (one prompt, one action)' });
      return joined;
    }
    const calls = deps.calls;
    return calls.run(joinKey, recentKey(session.id, envelope.correlation), caller, (handle) =>
      confirmAndRoute(tool, envelope, session, deps, ctx, audit, state, risk, { handle, keepaliveMs: calls.keepaliveMs }),
    );
  }
  return confirmAndRoute(tool, envelope, session, deps, ctx, audit, state, risk, undefined, send);
}

/** The risk as decided once for this call (before any person was asked). */
function riskNow(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: PipelineDeps): 'low' | 'high' {
  return riskOf(tool, session, envelope.payload.arguments, deps.pluginConfig?.(tool.owner), deps.allowAfterExternal);
}

async function confirmAndRoute(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, audit: RequestTrail, state: CallState | null, risk: 'low' | 'high', call?: { handle: CallHandle; keepaliveMs: number }, send?: Send): Promise<Answer> {
  // Stage 5: high-risk tools wait for a person.
  const denied = await confirm(tool, envelope, session, deps.confirmations, (id) =>
    note(audit, ctx, 'confirm', 'pending', { reason: `awaiting user confirmation ${id}` }),
  call, state, risk);
  if (denied) return reject(audit, ctx, 'confirm', denied);
  // The person approved what the call referred to then: it must still be that now.
  const shown = stateHash(state);
  if (shown !== null && deps.describeState && stateHash(await deps.describeState(tool, session, envelope.payload.arguments)) !== shown) {
    return reject(audit, ctx, 'confirm', pipelineError('STATE_CHANGED', `What this ${tool.name} call refers to changed after the person approved it; nothing ran. Call it again to ask them about what it refers to now.`, true, { stage: 5 }));
  }
  if (risk === 'high') pass(audit, ctx, 'confirm');
  return routeToOwner(tool, envelope, session, deps, ctx, audit, send);
}

/**
 * Stage 6: route to the owner. `send` reaches the caller before the answer: a core tool
 * that runs long (run_program) tells its `ipc` to keep waiting (the interim frame a
 * pending confirmation uses).
 */
async function routeToOwner(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: PipelineDeps, ctx: ResponseContext, audit: RequestTrail, send?: Send): Promise<Answer> {
  const unauditedNow = auditUnavailable(tool, deps.audit);
  if (unauditedNow) return reject(audit, ctx, 'route', unauditedNow);
  const files = await attachFiles(tool, envelope.payload.arguments, session, deps.files);
  if ('error' in files) return reject(audit, ctx, 'route', files.error, files.detail);
  if (files.attached.length > 0) envelope = { ...envelope, payload: { ...envelope.payload, arguments: files.args as RequestEnvelope['payload']['arguments'] } };
  note(audit, ctx, 'route', 'routed', { reason: `to ${tool.owner}${files.attached.length > 0 ? `; files: ${files.attached.join(', ')}` : ''}` });
  const keepWaiting = (ms: number): void => void send?.(JSON.stringify({ correlation: envelope.correlation, pending: { running: tool.name, wait_ms: ms } })).catch(() => undefined);
  const routed = await route(tool, envelope, session, deps.route, keepWaiting);
  if ('error' in routed) {
    note(audit, ctx, 'handler', 'error', {
      source: tool.owner,
      code: routed.handler?.code ?? routed.error.code,
      reason: routed.handler?.message ?? routed.error.message,
      detail: routed.detail,
    });
    return { source: routed.source, error: routed.error };
  }
  deps.succeeded?.(session, tool.name, envelope.payload.arguments, routed.result);
  return routed;
}

/**
 * No unaudited action: while the audit file cannot be written, a call that would reach a
 * plugin's handler, or a core tool that acts, is refused (retriable). The core's own
 * read-only intrinsics still answer.
 */
function auditUnavailable(tool: ToolEntry, log: AuditLog): ErrorPayload | null {
  if ((tool.owner === 'core' && !tool.acts) || log.writable) return null;
  return pipelineError('AUDIT_UNAVAILABLE', 'The audit log cannot be written right now; nothing was done. Try again later.', true, { stage: 6, retry_after: 5 });
}
