// The core's options and events (core.ts), apart so that the wiring stays readable.
import type { ReplyTarget } from './agents/replies.js';
import type { Abuse } from './boundary/session-guard.js';
import type { CoreConfig } from './config.js';
import type { EventEnvelope, JsonObject } from './protocol/envelope.js';

/** A reply that reached a person (the `replied` event). */
export interface Reply extends ReplyTarget {
  session: string;
  group: string;
  tool: string;
  arguments: JsonObject;
}

/** A reply tool's call that failed (the `reply-failed` event). */
export interface ReplyFailure {
  session: string;
  group: string;
  tool: string;
  /** Its error code (RATE_LIMITED, RESULT_UNKNOWN, ...) and message, secrets scrubbed. */
  code: string;
  message: string;
}

export interface CoreOptions {
  runDir: string;
  pluginsDir: string;
  auditFile: string;
  /** The person's own skills: propose_write writes there after a yes (it refuses without one). */
  skillsDir?: string;
  /** The person's documents folder: propose_write writes there after a yes (it refuses without one). */
  documentsDir?: string;
  config: CoreConfig;
  /** Values the core itself holds (model key, ...): never to appear in a response. */
  secrets?: string[];
  /** How often an unwritable audit file is probed (default 1 s; tests shorten it). */
  auditRetryMs?: number;
  /** Where standing approvals persist (in memory without it). */
  standingApprovalsFile?: string;
  /** carapace.json: pairing approvals are written to it (none can be approved without it). */
  configFile?: string;
  /** Where the names of accepted events persist, so a restarted core still refuses their repeats (in memory without it). */
  eventKeysFile?: string;
  /** Where events the configuration does not allow yet are kept (in memory without it). */
  heldEventsFile?: string;
  /** Take changes to `configFile` while running (config-watch/; default true when there is a file). */
  watchConfig?: boolean;
}

export interface CoreEvents {
  /** An event the core accepted from the bus, for the agent dispatcher. */
  event: [EventEnvelope];
  /** A session was quarantined: its socket is closed; its container must go (agent manager). */
  quarantined: [{ session: string; group: string; abuse: Abuse }];
  /** The plugin host's plugins have all answered their init: what they subscribe to reaches them. */
  'plugins-settled': [];
  /** A channel's reply tool (send_telegram, send_webchat, reply_email: manifest `reply`) delivered what a session's agent wrote: these arguments, through this plugin. */
  replied: [Reply];
  /** A call of a reply tool failed (refused, or its handler failed): what failed, scrubbed, for the notice if the turn ends without an answer. */
  'reply-failed': [ReplyFailure];
  /** A session closed (its agent's teardown, a quarantine, the core stopping): what it held elsewhere goes (its sandbox). */
  'session-closed': [{ session: string; group: string }];
}

