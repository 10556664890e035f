// The core's small files that must survive a restart (standing approvals, the keys of
// accepted events), opened with what is audited when one is unreadable or cannot be written.
import type { AuditLog } from './audit/audit-log.js';
import { SeenKeys } from './bus/seen-keys.js';
import { StandingApprovals } from './confirm/standing-approvals.js';

/** Event keys remembered to refuse repeats: far more than a plugin replays after a crash. */
const MAX_EVENT_KEYS = 10_000;

export function openStandingApprovals(file: string | null, audit: AuditLog): StandingApprovals {
  return new StandingApprovals(
    file,
    (problem) => audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'confirm', outcome: 'error', severity: 'CRITICAL', reason: `standing approvals file unreadable (${problem.error}); moved to ${problem.movedTo}: none are in force` }),
    (a) => audit.record({ group: a.group, session: null, source: 'core', topic: `tool.invoke.${a.tool}`, correlation: null, stage: 'confirm', outcome: 'ok', reason: `standing approval ${a.id} expired` }),
  );
}

export function openSeenKeys(file: string | null, audit: AuditLog): SeenKeys {
  return new SeenKeys(
    MAX_EVENT_KEYS,
    file,
    (problem) => audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'event', outcome: 'error', reason: `event keys file unreadable (${problem.error}); moved to ${problem.movedTo}: an event the plugin host sends again after this restart may be handled twice` }),
    (err) => audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'event', outcome: 'error', reason: `an accepted event's key could not be written (${err.message}): after a restart a repeat of it would be handled again` }),
  );
}
