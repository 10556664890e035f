// Stage 5: a high-risk tool waits for a person's yes.
import type { Session } from '../boundary/session-table.js';
import type { Confirmations } from '../confirm/confirmations.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import type { RequestEnvelope } from '../protocol/envelope.js';

export async function confirm(
  tool: ToolEntry,
  envelope: RequestEnvelope,
  session: Session,
  confirmations: Confirmations,
  onPending: (id: string) => void,
): Promise<ErrorPayload | null> {
  if (tool.risk_level !== 'high') return null;
  const { pending, answer } = confirmations.request({
    group: session.group,
    session: session.id,
    tool: tool.name,
    correlation: envelope.correlation,
    arguments: envelope.payload.arguments,
  });
  onPending(pending.id);
  const { decision } = await answer;
  if (decision === 'approved') return null;
  if (decision === 'denied') return pipelineError('CONFIRMATION_DENIED', `User denied ${tool.name} request`, false, { stage: 5 });
  return pipelineError('CONFIRMATION_TIMEOUT', `User did not approve ${tool.name} in time`, true, { stage: 5 });
}
