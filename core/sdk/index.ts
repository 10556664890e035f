// The plugin SDK: everything a handler imports (`import { ToolError } from '#sdk'`; the
// CalDAV plugins also `#sdk/calendar`).
// Handlers run in the plugin host, never in the core and never in a container.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InitFailureCategory } from '../src/protocol/errors.js';
import type { EventEnvelope, JsonObject, RequestEnvelope } from '../src/protocol/envelope.js';
import type { AuditEntry, AuditOutcome } from '../src/audit/audit-log.js';
import type { PluginHealth, ToolSummary } from '../src/plugins/catalog.js';
import type { ConfirmationStatus, PendingConfirmation } from '../src/confirm/confirmations.js';
import type { FileRef } from '../src/files/file-store.js';

/** A file argument (manifest `file_arguments`) reaches the handler as a FileRef: the core read and checked the file; the console serves it at /api/files/<id>. */
export type { EventEnvelope, JsonObject, RequestEnvelope, InitFailureCategory, AuditEntry, ToolSummary, PendingConfirmation, ConfirmationStatus, FileRef };
export { formatIso, isKnownTimeZone, wallClock, zoneOffsetMs, zonedToUtc } from './time.js';
// iCalendar and CalDAV are `#sdk/calendar`: only the plugins that use them load tsdav and ical.js.
export { truncate } from './text.js';
/**
 * The one sanitizer for text a stranger wrote (DESIGN decisions 12 and 16): every character a
 * person cannot see, or whose order they cannot trust, as a visible escape (⟦U+202E⟧), the
 * way approval prompts show them. Apply it to everything external a plugin hands an agent.
 */
export { escapeText } from '../src/text/escape.js';
/** A plugin panel's page files, JSON answers and small JSON bodies (servePanel). */
export { bundledPanelFolder, panelPages, readJsonBody, replyJson } from './panel.js';
/** Connection checks: a handler module's optional `checkConnections` export, run from the console's Checks page. */
export { CONNECTION_STEPS, errorWords, isTlsFailure, reach, scrubSecrets, tlsWords } from './connection-check.js';
export type { CheckConnections, ConnectionCheckContext, ConnectionCheckResult, ConnectionStep, Reach } from './connection-check.js';
/** A file replaced whole or not at all (temp file, fsync, rename): what a plugin keeps in its data folder. */
export { writeAtomically } from '../src/state/atomic-write.js';
/** A JSON state file as an earlier run left it: missing, loaded, or (not JSON, not its shape) moved aside for a person. */
export { readJsonState, StoreTooNewError, type SavedState } from '../src/state/json-state.js';
export { readVersionedJson, versionedJsonText, type JsonFormat } from '../src/state/versioned-json.js';
export { reportMigration } from '../src/state/format-migrations.js';

/** Throw for an intentional, agent-facing error. Anything else thrown is a crash. */
export class ToolError extends Error {
  readonly code: string;
  readonly retriable: boolean;

  constructor(opts: { code?: string; message: string; retriable: boolean }) {
    super(opts.message);
    this.code = opts.code ?? 'HANDLER_ERROR';
    this.retriable = opts.retriable;
    this.name = 'ToolError';
  }
}

/**
 * Throw from handleRequest() when its request's signal aborted it (the deadline passed)
 * and nothing was done yet: the agent is told it may simply try again. Throw it only
 * then: once something may have happened (a POST was sent, even if its answer never
 * came), let the abort end in any other error, and the agent is told the result is
 * unknown (RESULT_UNKNOWN) instead of being invited to do it twice.
 */
export class AbortedBeforeActing extends Error {
  constructor(message = 'stopped before acting') {
    super(message);
    this.name = 'AbortedBeforeActing';
  }
}

/** A core service refused the call; `code` says why (UNAUTHORIZED: the manifest or configuration does not give the plugin that power). */
export class ServiceError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ServiceError';
  }
}

/** Throw from initialize() to say precisely why it failed; the agent sees only the category. */
export class InitError extends Error {
  constructor(
    readonly category: InitFailureCategory,
    message: string,
  ) {
    super(message);
    this.name = 'InitError';
  }
}

/**
 * The classes above, also handed to every handler as `services.errors`: a plain-JavaScript
 * plugin whose folder is outside this project (where `#sdk` does not resolve) throws these
 * and is understood. The host tests `instanceof` against this one module, so an error
 * class of a plugin's own, however alike, is a crash.
 */
export const errors = Object.freeze({ ToolError, InitError, AbortedBeforeActing, ServiceError });
export type SdkErrors = typeof errors;

export type PluginConfig = Record<string, unknown>;

export interface AuditLogFilter {
  correlation?: string;
  topic?: string;
  outcome?: AuditOutcome;
  last_n?: number;
  since?: string;
  until?: string;
}

export interface SessionInfo {
  group: string;
  session_start: string | null;
  plugins: PluginHealth;
}

/**
 * Core services, scoped by the plugin host to the request being handled: a handler
 * never names a group or session. They are asynchronous because the core is another process.
 */
/** What the core did with a published event: nothing said, it is taken; `held`, why it waits for the configuration to allow it. */
export interface PublishOutcome {
  held?: string;
}

export interface CoreServices {
  getAuditLog(filters?: AuditLogFilter): Promise<AuditEntry[]>;
  getToolCatalog(): Promise<ToolSummary[]>;
  getSessionInfo(): Promise<SessionInfo>;
  /**
   * Publish message.inbound (a channel plugin, for a group its configuration maps) or
   * task.* (a plugin whose manifest says `provides.schedules`); anything else is dropped
   * and audited by the core. `key` names the
   * event at its source (e.g. a Telegram update id): the core accepts one event per key,
   * so a plugin that crashed after publishing but before saving its progress can publish
   * it again on restart without it being handled twice. Resolves once the core has it
   * (accepted, or refused for good and audited): save progress after that, never before.
   * Rejects with a ServiceError when it was not published (INVALID_INPUT: over 1 MiB) or the
   * plugin is stopping first (UNAVAILABLE: the plugin host keeps the event for the next run;
   * save no progress past it). Resolves with `held` when the core keeps the event unhandled
   * because the configuration does not allow it yet (a group the plugin's section does not
   * map): nothing was started; say so, never that a turn began.
   */
  publish(topic: string, group: string, payload: JsonObject, options?: { key?: string }): Promise<PublishOutcome>;
  /** Channel plugins, for a group they map; any other call is refused (ServiceError UNAUTHORIZED) and audited. */
  listConfirmations(group: string): Promise<PendingConfirmation[]>;
  /**
   * What became of a confirmation: pending, ended (decision and by whom), or unknown to the
   * running core (it restarted since: nothing of that request can run any more).
   */
  confirmationStatus(id: string): Promise<ConfirmationStatus>;
  /** Tell the people of a group something, through its channel plugins (user.notify). */
  notifyUser(group: string, text: string): Promise<boolean>;
  /** A fault the plugin contains but cannot repair (a corrupt file): a CRITICAL audit entry. */
  reportFault(message: string, group?: string): Promise<void>;
  /**
   * The bytes of a file a request handed this handler (a manifest `file_arguments` FileRef),
   * while handling that request; any other file is refused (ServiceError UNAUTHORIZED) and audited.
   */
  readFile(file: FileRef): Promise<Buffer>;
  /**
   * With `allowHours`, an approval also stands for that tool, exact arguments and group (a
   * person's choice). With `hash` (the description's hash, or a prefix of at least 8 hex
   * digits), the answer binds to what the person was shown: 'stale' (nothing decided) when
   * it is not the pending call's. False: nothing was pending (answered, expired, unknown).
   * Channel plugins only, for a group they map; any other call is refused (ServiceError
   * UNAUTHORIZED) and audited.
   */
  resolveConfirmation(id: string, approve: boolean, by: string, group: string, allowHours?: number, hash?: string): Promise<boolean | 'stale'>;
  /**
   * Channel plugins: a chat that is not mapped to any group wants to talk to the agent.
   * The core records a pairing request for the owner and answers with the code to tell
   * the chat; null when it will not (the owner refused this chat, or too many wait).
   * When the owner approves, the plugin hears `pairing.approved` {plugin, chat} for the group.
   */
  requestPairing(chat: string, details: { name?: string; text?: string }): Promise<{ code: string; expires_at: string } | null>;
  /** The plugin's own data directory on the host (never mounted into a container). */
  dataDir: string;
  /** ToolError, InitError, AbortedBeforeActing, ServiceError: the same classes `#sdk` exports, for handlers that cannot import it. */
  errors: SdkErrors;
  /**
   * An HTTP CONNECT proxy URL for clients that open their own TCP connections (IMAP, SMTP):
   * pass it as their `proxy` option. The plugin's network is only the hosts its manifest
   * declares (`network`); global fetch() already goes the same way. Undefined: connect directly.
   */
  egressProxy?: string;
}

export interface MemoryBriefEntry {
  id: string;
  type: string;
  content: string;
  behavioral: boolean;
  tags: string[];
  age_days: number;
  /** Stored by a session that had read external content: shown as such in every brief. */
  external: boolean;
}

export interface MemoryBrief {
  entries: MemoryBriefEntry[];
  generated_at: string;
  entry_count: number;
  brief_count: number;
}

/** What comes with each request besides its envelope. */
export interface RequestContext {
  /**
   * Aborted when the request's deadline passes: pass it on (fetch's `signal`, ...). How the
   * handler ends then is audited; see AbortedBeforeActing.
   */
  signal: AbortSignal;
}

export interface PluginHandler {
  initialize(config: PluginConfig, services: CoreServices): Promise<void>;
  handleRequest(envelope: RequestEnvelope, context: RequestContext): Promise<unknown>;
  handleEvent?(envelope: EventEnvelope): Promise<void>;
  shutdown?(): Promise<void>;
  /** Only for a plugin whose manifest declares provides.hooks: ["memory_brief"]. */
  getBrief?(group: string): Promise<MemoryBrief>;
  /**
   * Only for tools the manifest marks `describe: true`: what the call's arguments refer to
   * on the host, in lines a person reads before approving (a reminder's title and due date
   * for its id; the evidence a report would attach). At most 50 lines of 4000 characters;
   * the approval holds only while these lines stay the same.
   */
  describeCall?(tool: string, args: JsonObject, group: string): Promise<string[]>;
  /**
   * Only for a plugin whose manifest declares `panel`: its page in the console, a plain
   * Node HTTP handler. Requests arrive only through the console (session and CSRF checked,
   * cookies removed, `x-carapace-console: 1` added) at paths relative to /plugins/<name>/.
   */
  servePanel?(req: IncomingMessage, res: ServerResponse): unknown;
}
