// Stage 6: hand the validated envelope to the intrinsic or plugin that owns the tool,
// and turn whatever comes back into either a result or a structured error.
import type { Session } from '../boundary/session-table.js';
import type { IntrinsicDeps } from '../intrinsics/intrinsics.js';
import { runIntrinsic } from '../intrinsics/intrinsics.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ToolEntry } from '../plugins/discovery.js';
import type { PluginHostLink } from '../plugins/host-link.js';
import { pipelineError, PLUGIN_ERROR_MESSAGE, RESERVED_CODES, ToolFailure, type ErrorPayload } from '../protocol/errors.js';
import type { RequestEnvelope } from '../protocol/envelope.js';

export const MAX_RESPONSE_BYTES = 1024 * 1024;

export type Routed =
  | { source: string; result: unknown }
  | {
      source: string;
      error: ErrorPayload;
      /** What the handler itself said, before normalization (audit only). */
      handler?: { code: string; message: string };
      /** Internal detail for the audit log only (stack traces). */
      detail?: string;
    };

export interface RouteDeps {
  catalog: ToolCatalog;
  hostLink: PluginHostLink;
  intrinsics: IntrinsicDeps;
  timeoutMs: number;
  /** After the deadline, how long the handler has to say it stopped before acting. */
  abortGraceMs: number;
}

function crash(source: string, detail: string): Routed {
  return { source: 'core', error: pipelineError('PLUGIN_ERROR', PLUGIN_ERROR_MESSAGE, false), detail: `${source}: ${detail}` };
}

/** A result must be plain JSON data and at most 1 MB once serialized. */
function checkResult(source: string, result: unknown): Routed {
  let json: string | undefined;
  try {
    json = JSON.stringify(result);
  } catch (err) {
    return crash(source, `result is not JSON-serializable: ${(err as Error).message}`);
  }
  if (json === undefined) return crash(source, 'result is not JSON-serializable (undefined or a function)');
  if (Buffer.byteLength(json) > MAX_RESPONSE_BYTES) {
    return { source, error: { code: 'HANDLER_ERROR', message: 'Response exceeded maximum size', retriable: false } };
  }
  return { source, result };
}

/**
 * `keepWaiting`: tells the caller the answer may take this long yet (a core tool that runs
 * longer than `ipc` waits by default: run_program).
 */
export async function route(tool: ToolEntry, envelope: RequestEnvelope, session: Session, deps: RouteDeps, keepWaiting: (ms: number) => void = () => undefined): Promise<Routed> {
  if (tool.owner === 'core') {
    try {
      const answer = await runIntrinsic(tool.name, envelope.payload.arguments, session, deps.intrinsics, { correlation: envelope.correlation, keepWaiting });
      if (answer instanceof ToolFailure) return { source: 'core', error: answer.error, ...(answer.detail ? { detail: answer.detail } : {}) };
      return checkResult('core', answer);
    } catch (err) {
      return crash('core', (err as Error).stack ?? String(err));
    }
  }
  const plugin = tool.owner;
  const unavailable = (why: string): Routed => ({
    source: 'core',
    error: pipelineError('PLUGIN_UNAVAILABLE', `Plugin "${plugin}" is ${why}`, true, { stage: 6 }),
  });
  if (deps.catalog.state(plugin) !== 'healthy') return unavailable('not available right now');

  // The files attached in place of the agent's paths (files/attach-files.ts): the plugin may read these.
  const args = envelope.payload.arguments as Record<string, { id?: unknown } | undefined>;
  const files = tool.file_arguments?.map((name) => args[name]?.id).filter((id): id is string => typeof id === 'string');
  const outcome = await deps.hostLink.invoke(plugin, envelope, session.id, deps.timeoutMs, deps.abortGraceMs, files?.length ? files : undefined);
  switch (outcome.kind) {
    case 'result':
      return checkResult(plugin, outcome.result);
    case 'tool_error': {
      // RESULT_UNKNOWN is the one reserved code a handler may claim ("it may have acted"),
      // and never retriable; any other reserved code becomes HANDLER_ERROR.
      const unknown = outcome.code === 'RESULT_UNKNOWN';
      const code = unknown ? outcome.code : RESERVED_CODES.has(outcome.code) ? 'HANDLER_ERROR' : outcome.code;
      return {
        source: plugin,
        error: { code, message: outcome.message, retriable: unknown ? false : outcome.retriable },
        handler: { code: outcome.code, message: outcome.message },
      };
    }
    case 'crash':
      return crash(plugin, outcome.detail);
    case 'unavailable':
      return unavailable('not running');
    case 'unknown':
      return {
        source: 'core',
        error: pipelineError('RESULT_UNKNOWN', `Plugin "${plugin}" stopped while handling this request: it may or may not have been carried out. Check (e.g. by listing) before trying again`, false, { stage: 6 }),
      };
    case 'timeout':
      // Retriable only when the handler is known to have stopped without acting; otherwise a retry could act twice.
      if (outcome.stopped) {
        return {
          source: 'core',
          error: pipelineError('PLUGIN_TIMEOUT', `Plugin "${plugin}" did not respond within ${Math.round(deps.timeoutMs / 1000)}s; it stopped without acting`, true, { stage: 6 }),
          detail: 'aborted at the deadline: the handler stopped before acting',
        };
      }
      return {
        source: 'core',
        error: pipelineError('RESULT_UNKNOWN', `Plugin "${plugin}" did not respond within ${Math.round(deps.timeoutMs / 1000)}s and may or may not have carried this out. Check (e.g. by listing) before trying again`, false, { stage: 6 }),
        detail: outcome.late
          ? `aborted at the deadline: the handler did not stop before acting; it ended with ${outcome.late} after the deadline`
          : `aborted at the deadline: no word from the handler within ${deps.abortGraceMs} ms (its final word is audited when it comes)`,
      };
  }
}
