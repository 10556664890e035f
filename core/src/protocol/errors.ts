// Structured errors as values. Codes are the specification's; `stage`, `field` and
// `retry_after` appear only where the pipeline produced the error.

export const PIPELINE_CODES = [
  'UNKNOWN_TOOL',
  'VALIDATION_FAILED',
  'UNAUTHORIZED',
  'RATE_LIMITED',
  'CONFIRMATION_TIMEOUT',
  'CONFIRMATION_DENIED',
  // Too many confirmations already wait for a person in this group (retriable).
  'CONFIRMATION_LIMIT',
  // The request was withdrawn before anyone answered (caller gone, core stopping): nothing ran.
  'CONFIRMATION_WITHDRAWN',
  // What a high-risk call refers to (its plugin's description) changed after the person
  // approved it: nothing ran (retriable: the next call asks again).
  'STATE_CHANGED',
  'PLUGIN_TIMEOUT',
  'PLUGIN_UNAVAILABLE',
  'PLUGIN_ERROR',
  // The plugin host went away while a handler had the request: it may have acted.
  'RESULT_UNKNOWN',
  // The audit log cannot be written: nothing that would act is done (retriable).
  'AUDIT_UNAVAILABLE',
] as const;

export type PipelineCode = (typeof PIPELINE_CODES)[number];
export type ErrorCode = PipelineCode | 'HANDLER_ERROR';

/** Codes a handler may not claim: a ToolError using one becomes HANDLER_ERROR. */
export const RESERVED_CODES: ReadonlySet<string> = new Set<string>(PIPELINE_CODES);

export type Stage = 1 | 2 | 3 | 4 | 5 | 6;

export interface ErrorPayload {
  /** A pipeline code, HANDLER_ERROR, or a handler's own non-reserved code. */
  code: ErrorCode | (string & {});
  message: string;
  retriable: boolean;
  stage?: Stage;
  field?: string;
  retry_after?: number;
}

export function pipelineError(
  code: PipelineCode,
  message: string,
  retriable: boolean,
  extra: { stage?: Stage; field?: string; retry_after?: number } = {},
): ErrorPayload {
  const error: ErrorPayload = { code, message, retriable };
  if (extra.stage !== undefined) error.stage = extra.stage;
  if (extra.field !== undefined) error.field = extra.field;
  if (extra.retry_after !== undefined) error.retry_after = extra.retry_after;
  return error;
}

/** The fixed message for crashes: nothing of the handler's internals reaches the agent. */
export const PLUGIN_ERROR_MESSAGE = 'Internal plugin error';

/** Why a plugin failed to initialize: a closed set, never the raw exception. */
/** NOT_CONFIGURED: the plugin is simply not set up (no settings, or its .env secret is empty): not a fault. */
export const INIT_FAILURE_CATEGORIES = ['NETWORK_ERROR', 'AUTH_ERROR', 'CONFIG_ERROR', 'INTERNAL_ERROR', 'NOT_CONFIGURED'] as const;
export type InitFailureCategory = (typeof INIT_FAILURE_CATEGORIES)[number];

/** Errors that stop the core from starting (bad manifests, bad config). */
export class StartupError extends Error {
  constructor(
    readonly code: 'MANIFEST_INVALID' | 'DUPLICATE_TOOL' | 'RESERVED_TOOL_NAME' | 'DUPLICATE_HOOK' | 'CONFIG_INVALID',
    message: string,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}

/**
 * A core tool's answer when it could not do what was asked: an error as a value, never
 * thrown (route.ts answers it as the tool's error; `detail` goes to the audit log only).
 * Codes are the tool's own (e.g. RUN_BUSY, SANDBOX_UNAVAILABLE), or VALIDATION_FAILED.
 */
export class ToolFailure {
  constructor(
    readonly error: ErrorPayload,
    readonly detail?: string,
  ) {}
}
