// What the core's own tools are made of and given: their definition, the deps the core
// hands them, the call they answer. Apart from intrinsics.ts (the registry) so that each
// tool's module (sandbox-runs/, skills/, proposed-writes/) imports these without importing
// the registry that imports it.
import type { AuditLog } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import type { CallState } from '../confirm/call-state.js';
import type { GroupAuthorizer } from '../pipeline/authorize.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ProposedPlaces } from '../proposed-writes/proposed-places.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ToolFailure } from '../protocol/errors.js';

/** What run_program needs of the core (sandbox-runs/program-runs.ts); absent where the core has no sandbox. */
export interface ProgramRunner {
  run(args: JsonObject, session: Session, call: CallContext): Promise<unknown>;
}

export interface IntrinsicDeps {
  audit: AuditLog;
  catalog: ToolCatalog;
  authorizer: GroupAuthorizer;
  runs?: ProgramRunner;
  /** Where propose_write writes after a yes: the person's skills and documents folders. */
  places: ProposedPlaces;
  skills?: SkillRunner;
  /** The bytes of a file the core keeps (files/file-store.ts): what propose_write took from a workspace. */
  keptFile?: (id: string) => Buffer | null;
  /** Find the skills again: one was written (propose_write). */
  skillsChanged?: () => void;
}

/** What run_skill and list_skills need of the core (skills/skill-runs.ts); absent where the core has no sandbox. */
export interface SkillRunner {
  list(): unknown;
  run(args: JsonObject, session: Session, call: CallContext): Promise<unknown>;
}

/** The call an intrinsic answers. */
export interface CallContext {
  correlation: string;
  /** Tells the caller the answer may take this long yet (its `ipc` moves its deadline). */
  keepWaiting(ms: number): void;
}

/** A result, or a ToolFailure (an error as a value), now or later. */
export type Intrinsic = (args: JsonObject, session: Session, deps: IntrinsicDeps, call: CallContext) => unknown | ToolFailure | Promise<unknown | ToolFailure>;

export interface IntrinsicDefinition {
  name: string;
  description: string;
  schema: JsonObject;
  run: Intrinsic;
  /** It acts (ToolEntry.acts). */
  acts?: boolean;
  /** Its risk (default low): a high one waits for a person's yes. */
  risk?: 'high';
  /** What the arguments must mean beyond the schema: a refusal at stage 3, before any person is asked. */
  check?: (args: JsonObject) => ToolFailure | null;
  /** What a call refers to now (as a plugin's describeCall): shown to the person, compared after their yes. */
  describe?: (args: JsonObject, deps: IntrinsicDeps) => CallState;
  /** Its answer is external content (ToolEntry.untrusted_output). */
  untrustedOutput?: boolean;
}
