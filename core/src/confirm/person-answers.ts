// What only a person makes: standing approvals (granted, granted with what the call refers
// to now, revoked) and answers to pending confirmations, each audited. The console, the
// admin API and channel plugins reach these through the core (core.ts delegates here).
import type { AuditLog } from '../audit/audit-log.js';
import { GROUP_NAME_PATTERN } from '../boundary/session-table.js';
import type { GroupAuthorizer } from '../pipeline/authorize.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ToolEntry } from '../plugins/discovery.js';
import type { JsonObject } from '../protocol/envelope.js';
import { stateHash, type CallState } from './call-state.js';
import { hashMatches, type Confirmations } from './confirmations.js';
import { describeCall } from './describe-call.js';
import type { Grant, GrantRefusal, StandingApproval, StandingApprovals } from './standing-approvals.js';

export interface PersonAnswer {
  answered: boolean;
  stale?: boolean;
  standing?: StandingApproval | GrantRefusal;
}

export interface PersonAnswerDeps {
  catalog: ToolCatalog;
  authorizer: GroupAuthorizer;
  standing: StandingApprovals;
  confirmations: Confirmations;
  audit: AuditLog;
  /** What a `describe` tool's call refers to now, from its plugin (Core.describeState). */
  describeState: (tool: ToolEntry, group: string, args: JsonObject) => Promise<CallState>;
}

export class PersonAnswers {
  constructor(private readonly deps: PersonAnswerDeps) {}

  /** Allows `tool` with exactly these arguments (validated, defaults applied) in `group` for `hours`. */
  grantStanding(input: Grant): StandingApproval | GrantRefusal {
    const { catalog, authorizer, standing, audit } = this.deps;
    const tool = catalog.lookup(input.tool);
    if (!tool || !GROUP_NAME_PATTERN.test(input.group) || !authorizer.mayUse(input.group, tool)) {
      return { code: 'INVALID_INPUT', message: `no tool "${input.tool}" that group "${input.group}" may use` };
    }
    const args = structuredClone(input.arguments);
    if (typeof args !== 'object' || args === null || !tool.validate(args)) {
      return { code: 'INVALID_INPUT', message: `the arguments do not fit ${tool.name}'s schema` };
    }
    const granted = standing.grant({ ...input, arguments: args });
    if ('id' in granted) {
      audit.record({ group: granted.group, session: null, source: input.by, topic: `tool.invoke.${granted.tool}`, correlation: null, stage: 'confirm', outcome: 'ok', reason: `standing approval ${granted.id} granted by ${input.by} until ${granted.expires_at}`, detail: JSON.stringify(granted.arguments) });
    }
    return granted;
  }

  /**
   * A standing approval made directly (admin API, CLI): for a `describe` tool, what the call
   * refers to now is recorded with it, so that it holds only while that stays the same.
   */
  async grantStandingDescribed(input: Omit<Grant, 'state'>): Promise<StandingApproval | GrantRefusal> {
    const tool = this.deps.catalog.lookup(input.tool);
    if (!tool?.describe) return this.grantStanding(input);
    const state = await this.deps.describeState(tool, input.group, input.arguments);
    if ('unavailable' in state) return { code: 'UNAVAILABLE', message: `the ${tool.owner} plugin could not say what this call refers to (${state.unavailable}); nothing was granted` };
    return this.grantStanding({ ...input, state: { lines: describeCall(tool.name, input.group, input.arguments, state).state, hash: stateHash(state) } });
  }

  revokeStanding(id: string, by: string): StandingApproval | null {
    const revoked = this.deps.standing.revoke(id);
    if (revoked) this.deps.audit.record({ group: revoked.group, session: null, source: by, topic: `tool.invoke.${revoked.tool}`, correlation: null, stage: 'confirm', outcome: 'ok', reason: `standing approval ${revoked.id} revoked by ${by}` });
    return revoked;
  }

  /**
   * A person's answer to a pending confirmation; with `allowHours`, an approval also stands
   * for that tool with those exact arguments in that group. False: nothing was pending.
   * With `hash` (the console, Telegram's buttons), the answer binds to what was shown: a
   * hash that is not the pending call's decides nothing (`stale`).
   */
  answerConfirmation(id: string, approve: boolean, by: string, allowHours?: number, hash?: string): PersonAnswer {
    const { confirmations, audit } = this.deps;
    const pending = confirmations.get(id);
    if (!pending) return { answered: false };
    if (hash !== undefined && !hashMatches(pending.description.hash, hash)) {
      audit.record({ group: pending.group, session: pending.session, source: by, topic: `tool.invoke.${pending.tool}`, correlation: pending.correlation, stage: 'confirm', outcome: 'rejected', reason: `an answer by ${by} named another description (hash ${hash.slice(0, 16)}): nothing decided` });
      return { answered: false, stale: true };
    }
    const standing = approve && allowHours !== undefined
      ? this.grantStanding({ group: pending.group, tool: pending.tool, arguments: pending.arguments, hours: allowHours, by, state: { lines: pending.description.state, hash: pending.state_hash } })
      : undefined;
    return { answered: confirmations.resolve(id, approve, by) === true, ...(standing ? { standing } : {}) };
  }
}
