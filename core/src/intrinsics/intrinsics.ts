// The core's own tools. Their schemas live here, in code, and they pass through the
// same six stages as any plugin tool. The read-only ones read only what the core holds in
// memory, always scoped to the calling session; run_program (sandbox-runs/) and run_skill
// (skills/) act, so they follow the group's allow-list and are awaited like a plugin's
// handler; run_skill's answer is external content (untrusted_output).
import type { AuditEntry, AuditOutcome } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import { compileTool, type ToolEntry } from '../plugins/discovery.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ErrorPayload } from '../protocol/errors.js';
import { RUN_PROGRAM } from '../sandbox-runs/run-program-tool.js';
import { PROPOSE_WRITE } from '../proposed-writes/propose-write-tool.js';
import { LIST_SKILLS, RUN_SKILL } from '../skills/run-skill-tool.js';
import type { CallState } from '../confirm/call-state.js';
import type { CallContext, Intrinsic, IntrinsicDefinition, IntrinsicDeps } from './intrinsic-types.js';

export type { CallContext, Intrinsic, IntrinsicDefinition, IntrinsicDeps, ProgramRunner, SkillRunner } from './intrinsic-types.js';

const OUTCOMES: AuditOutcome[] = ['error', 'rejected', 'sanitized', 'routed', 'ok', 'passed', 'dropped', 'pending'];

/** What the agent may see of an audit entry: no session ids, no internal detail. */
function visible(e: AuditEntry): JsonObject {
  const out: JsonObject = { timestamp: e.timestamp, topic: e.topic, correlation: e.correlation, stage: e.stage, outcome: e.outcome };
  if (e.code !== undefined) out.code = e.code;
  if (e.reason !== undefined) out.reason = e.reason;
  if (e.duration_ms !== undefined) out.duration_ms = e.duration_ms;
  return out;
}

const getDiagnostics: Intrinsic = (args, session, { audit, catalog }) => {
  const scope = { group: session.group, session: session.id };
  if (typeof args.correlation === 'string') {
    const entries = audit.query({ ...scope, correlation: args.correlation });
    const handler = entries.find((e) => e.stage === 'handler');
    const tool = entries[0]?.topic?.replace(/^tool\.invoke\./, '');
    const owner = tool ? catalog.lookup(tool)?.owner : undefined;
    return {
      correlation: args.correlation,
      found: entries.length > 0,
      stages: entries.map(visible),
      handler_error_code: handler?.code ?? null,
      plugin: owner && owner !== 'core' ? { name: owner, state: catalog.state(owner) ?? 'unknown' } : null,
    };
  }
  const outcome = args.filter_outcome as AuditOutcome;
  return { entries: audit.query({ ...scope, outcome, last_n: args.last_n as number }).map(visible) };
};

const listTools: Intrinsic = (_args, session, { catalog, authorizer }) => ({
  tools: catalog
    .available()
    .filter((t) => {
      const entry = catalog.lookup(t.name);
      return entry !== undefined && authorizer.mayUse(session.group, entry);
    })
    .map(({ name, description, risk_level }) => ({ name, description, risk_level })),
});

const getSessionInfo: Intrinsic = (_args, session, { catalog }) => ({
  group: session.group,
  session_start: session.startedAt,
  plugins: catalog.health(),
});

const DEFINITIONS: IntrinsicDefinition[] = [
  {
    name: 'get_diagnostics',
    description: 'Trace one request by correlation id, or list recent failures in this session',
    schema: {
      type: 'object',
      additionalProperties: false,
      properties: {
        correlation: { type: 'string', maxLength: 128 },
        last_n: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
        filter_outcome: { enum: OUTCOMES, default: 'error' },
      },
    },
    run: getDiagnostics,
  },
  {
    name: 'list_tools',
    description: 'List the tools this session may call',
    schema: { type: 'object', additionalProperties: false, properties: {} },
    run: listTools,
  },
  {
    name: 'get_session_info',
    description: 'Show this session: group, start time, plugin health',
    schema: { type: 'object', additionalProperties: false, properties: {} },
    run: getSessionInfo,
  },
  RUN_PROGRAM,
  PROPOSE_WRITE,
  RUN_SKILL,
  LIST_SKILLS,
];

export const INTRINSIC_NAMES = DEFINITIONS.map((d) => d.name);

export const intrinsicTools: ToolEntry[] = DEFINITIONS.map((d) =>
  compileTool({ name: d.name, description: d.description, risk_level: d.risk ?? 'low', arguments_schema: d.schema, ...(d.acts ? { acts: true } : {}), ...(d.describe ? { describe: true } : {}), ...(d.untrustedOutput ? { untrusted_output: true } : {}) }, 'core'),
);

const RUNNERS = new Map(DEFINITIONS.map((d) => [d.name, d.run]));
const CHECKS = new Map(DEFINITIONS.flatMap((d) => (d.check ? [[d.name, d.check] as const] : [])));
const DESCRIBERS = new Map(DEFINITIONS.flatMap((d) => (d.describe ? [[d.name, d.describe] as const] : [])));

/** A core tool's own check of schema-valid arguments (stage 3); null when they pass. */
export function checkIntrinsic(name: string, args: JsonObject): ErrorPayload | null {
  return CHECKS.get(name)?.(args)?.error ?? null;
}

/** What a call of a core tool that describes (propose_write) refers to now. */
export function describeIntrinsic(name: string, args: JsonObject, deps: IntrinsicDeps): CallState {
  const describe = DESCRIBERS.get(name);
  if (!describe) return { unavailable: `${name} describes nothing` };
  try {
    return describe(args, deps);
  } catch (err) {
    return { unavailable: (err as Error).message };
  }
}

export function runIntrinsic(name: string, args: JsonObject, session: Session, deps: IntrinsicDeps, call: CallContext): unknown | Promise<unknown> {
  const run = RUNNERS.get(name);
  if (!run) throw new Error(`no intrinsic ${name}`);
  return run(args, session, deps, call);
}
