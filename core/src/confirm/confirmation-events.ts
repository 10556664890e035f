// What each pending confirmation's life is told: its prompt and its outcome published to
// the channels that may see its group, and a person's answer audited.
import type { AuditLog } from '../audit/audit-log.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { Confirmations } from './confirmations.js';

export function announceConfirmations(confirmations: Confirmations, publish: (topic: string, group: string, payload: JsonObject) => void, audit: AuditLog): void {
  confirmations.on('requested', (p) =>
    publish('confirmation.requested', p.group, { id: p.id, tool: p.tool, arguments: p.arguments, expires_at: p.expires_at, description: { ...p.description } }),
  );
  confirmations.on('resolved', (p, decision, by) => {
    publish('confirmation.resolved', p.group, { id: p.id, tool: p.tool, decision, by });
    audit.record({ group: p.group, session: p.session, source: by, topic: `tool.invoke.${p.tool}`, correlation: p.correlation, stage: 'confirm', outcome: decision === 'approved' ? 'passed' : 'rejected', reason: `confirmation ${decision} by ${by}` });
  });
}
