// Stage 5: a high-risk tool waits for a person's yes, while its callers are told it is
// pending (see confirm/waiting-calls.ts). If no caller can be reached any more, the
// confirmation is withdrawn: an answer after that runs nothing.
import type { Session } from '../boundary/session-table.js';
import type { CallState } from '../confirm/call-state.js';
import type { Confirmations } from '../confirm/confirmations.js';
import { uncheckable } from '../confirm/describe-call.js';
import type { CallHandle } from '../confirm/waiting-calls.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import type { JsonObject, RequestEnvelope } from '../protocol/envelope.js';
import { recipientRisk } from './untrusted-input.js';

const NONE: ReadonlySet<string> = new Set();

/**
 * A tool's risk for this caller: higher when a scheduled task's run may be acting
 * unattended; lower for mail to listed recipients, but never after untrusted input
 * (untrusted-input.ts); high for a tool with an external effect once the session has read
 * external content, unless the person's `allowAfterExternal` names it (for tools with
 * `low_risk_recipients`, their plugin's `untrusted_turns` setting is that word).
 * `args` and `pluginConfig` only matter to `low_risk_recipients` tools.
 */
export function riskOf(
  tool: Pick<ToolEntry, 'name' | 'risk_level' | 'task_run_risk_level' | 'low_risk_recipients' | 'external_effect'>,
  session: Pick<Session, 'taskStarted' | 'untrustedInput' | 'group'>,
  args?: JsonObject,
  pluginConfig?: JsonObject,
  allowAfterExternal: ReadonlySet<string> = NONE,
): 'low' | 'high' {
  const base = session.taskStarted && tool.task_run_risk_level ? tool.task_run_risk_level : tool.risk_level;
  const risk = recipientRisk(tool, base, session, args, pluginConfig);
  if (risk === 'low' && session.untrustedInput && tool.external_effect && !tool.low_risk_recipients && !allowAfterExternal.has(tool.name)) return 'high';
  return risk;
}

/**
 * A high-risk call whose arguments hold characters no person can check (tag characters,
 * bidi embeddings, overrides, isolates) is refused before anyone is asked, unless its tool
 * is in `confirmations.allow_hidden_characters`. Null: nothing of the kind (or allowed).
 */
export function refuseHidden(tool: Pick<ToolEntry, 'name'>, args: unknown, allowed: ReadonlySet<string>): ErrorPayload | null {
  if (allowed.has(tool.name)) return null;
  const found = uncheckable(args);
  if (!found) return null;
  const where = found.field ? `"${found.field}"` : 'the arguments';
  const message = `${where} holds ${found.kinds}: characters a person cannot see or whose order they cannot trust, so nobody can approve this ${tool.name} call; send it without them`;
  return pipelineError('VALIDATION_FAILED', message, false, { stage: 5, field: found.field });
}

export async function confirm(
  tool: ToolEntry,
  envelope: RequestEnvelope,
  session: Session,
  confirmations: Confirmations,
  onPending: (id: string) => void,
  call?: { handle: CallHandle; keepaliveMs: number },
  state: CallState | null = null,
  risk: 'low' | 'high' = riskOf(tool, session),
): Promise<ErrorPayload | null> {
  if (risk !== 'high') return null;
  const requested = confirmations.request({
    group: session.group,
    session: session.id,
    tool: tool.name,
    correlation: envelope.correlation,
    arguments: envelope.payload.arguments,
  }, state);
  if (!requested) {
    const message = `Too many confirmations are already waiting for a person in group "${session.group}"; try again once they are answered`;
    return pipelineError('CONFIRMATION_LIMIT', message, true, { stage: 5, retry_after: 30 });
  }
  const { pending, answer } = requested;
  onPending(pending.id);
  let timer: NodeJS.Timeout | undefined;
  if (call) {
    call.handle.pending(pending.id, Date.parse(pending.expires_at));
    timer = setInterval(() => {
      void call.handle.keepalive().then((reached) => {
        if (reached === 0) confirmations.withdraw(pending.id, 'core: caller gone');
      });
    }, call.keepaliveMs);
  }
  const { decision, by } = await answer.finally(() => clearInterval(timer));
  if (decision === 'approved') return null;
  if (decision === 'denied') return pipelineError('CONFIRMATION_DENIED', `User denied ${tool.name} request`, false, { stage: 5 });
  if (decision === 'withdrawn') {
    return pipelineError('CONFIRMATION_WITHDRAWN', `The ${tool.name} request was withdrawn before anyone answered (${by}); nothing ran`, true, { stage: 5 });
  }
  return pipelineError('CONFIRMATION_TIMEOUT', `User did not approve ${tool.name} in time`, true, { stage: 5 });
}
