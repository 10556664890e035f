// The response path: sanitize, log, forward. Every answer takes it, errors included.
import type { AuditInput } from '../audit/audit-log.js';
import type { ErrorPayload } from '../protocol/errors.js';
import { newId, now, PROTOCOL_VERSION, type ResponseEnvelope } from '../protocol/envelope.js';
import type { Sanitizer } from './sanitize.js';

export interface ResponseContext {
  group: string;
  session: string;
  topic: string;
  correlation: string | null;
  startedAt: number;
}

export type Answer = { source: string; result: unknown } | { source: string; error: ErrorPayload };

/** The reply as the text sent (a string: see boundary/send-queue.ts). */
export function buildResponse(ctx: ResponseContext, answer: Answer, sanitize: Sanitizer, audit: { record(input: AuditInput): unknown }): string {
  const payload = 'error' in answer ? { result: null, error: answer.error } : { result: answer.result, error: null };
  const { value, redactedPaths } = sanitize(payload);
  const { group, session, topic, correlation } = ctx;
  const source = answer.source;
  if (redactedPaths.length > 0) {
    audit.record({ group, session, source, topic, correlation, stage: 'sanitize', outcome: 'sanitized', fields: redactedPaths, reason: 'credential pattern redacted' });
  }
  const error = value.error;
  audit.record({
    group,
    session,
    source,
    topic,
    correlation,
    stage: 'response',
    outcome: error ? 'error' : 'ok',
    code: error?.code,
    reason: error?.message,
    duration_ms: Math.round((performance.now() - ctx.startedAt) * 1000) / 1000,
  });
  const envelope: ResponseEnvelope = {
    id: newId(),
    version: PROTOCOL_VERSION,
    type: 'response',
    topic: ctx.topic,
    source: answer.source,
    correlation: ctx.correlation,
    timestamp: now(),
    group: ctx.group,
    payload: value,
  };
  return JSON.stringify(envelope);
}
