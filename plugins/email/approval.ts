// Whether a person approved a send, for the console's page: the core's audit trail of this
// very call says so (stage "confirm" passed: a person's answer, or a standing approval a
// person gave). The plugin never decides it and never sees the prompt.
import type { AuditEntry, CoreServices, RequestEnvelope } from '#sdk';

export interface Approval {
  /** true: a person approved; false: nobody was asked (every recipient listed); null: the trail could not be read. */
  approved: boolean | null;
  approved_by?: string;
}

/** The entries of this call: its session's, from its last envelope entry on (the agent picks correlation ids, and may repeat one). */
function thisCall(trail: AuditEntry[], envelope: RequestEnvelope): AuditEntry[] {
  const mine = trail.filter((e) => e.session === envelope.source);
  let start = 0;
  for (let i = mine.length - 1; i >= 0; i--) {
    if (mine[i].stage === 'envelope') {
      start = i;
      break;
    }
  }
  return mine.slice(start);
}

export async function approvalOf(services: Pick<CoreServices, 'getAuditLog'>, envelope: RequestEnvelope): Promise<Approval> {
  let trail: AuditEntry[];
  try {
    trail = await services.getAuditLog({ correlation: envelope.correlation, topic: envelope.topic });
  } catch {
    return { approved: null };
  }
  const passed = thisCall(trail, envelope).filter((e) => e.stage === 'confirm' && e.outcome === 'passed');
  if (passed.length === 0) return { approved: false };
  // The core's own words: "confirmation approved by <who>" (its source is who), or "standing approval <id> by <who>, until …".
  const answered = passed.find((e) => e.reason?.startsWith('confirmation approved by '));
  if (answered) return { approved: true, approved_by: answered.source };
  const standing = passed.find((e) => e.reason?.startsWith('standing approval '));
  return { approved: true, ...(standing?.reason ? { approved_by: standing.reason.split(',')[0] } : {}) };
}
