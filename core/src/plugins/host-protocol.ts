// Messages between the core and the plugin host over the private plugin socket.
// Both ends are trusted; the socket is never mounted into an agent container.
import type { InitFailureCategory } from '../protocol/errors.js';
import type { EventEnvelope, JsonObject, RequestEnvelope } from '../protocol/envelope.js';

export type HandlerOutcome =
  | { kind: 'result'; result: unknown }
  | { kind: 'tool_error'; code: string; message: string; retriable: boolean }
  | { kind: 'crash'; detail: string }
  | { kind: 'unavailable' }
  /** The request was aborted (its deadline) and the handler said it stopped before acting (AbortedBeforeActing). */
  | { kind: 'stopped' }
  /** The plugin's process ended while it held the request: whether it acted is unknown. */
  | { kind: 'lost' };

export type ServiceMethod = 'getAuditLog' | 'getToolCatalog' | 'getSessionInfo' | 'resolveConfirmation' | 'listConfirmations' | 'confirmationStatus' | 'notifyUser' | 'reportFault' | 'reportMigration' | 'requestPairing' | 'readFile';

/**
 * The link's own version, said in the host's hello. 2: the core hands the host each
 * plugin's settings (`configuration`); a host of version 1 read carapace.json itself, and
 * could run on another configuration than the core's, so it is refused. 3: a frame may
 * carry a JSON array of messages (a batch, boundary/frame-batch.ts), which a peer of
 * version 2 would drop.
 */
export const HOST_LINK_VERSION = 3;

/** One plugin's section of carapace.json as the core runs it (`${VAR}` references unresolved) and its revision. */
export interface PluginSettings {
  settings: JsonObject;
  /** A hash of `settings`: the host says which revision a plugin runs on in its `init`. */
  revision: string;
}

/** What the plugin host runs on, from the core: every discovered plugin's section and the host's bounds. */
export interface HostConfiguration {
  plugins: Record<string, PluginSettings>;
  handler_timeout_ms: number;
  shutdown_timeout_ms: number;
}

export type HostToCore =
  /** `version`: the link's version the host speaks (HOST_LINK_VERSION); a core that does not speak it refuses the host. */
  | { t: 'hello'; pid: number; version: number }
  /**
   * The values the host filled into plugins' settings from its environment (`${VAR}`), sent
   * before any plugin runs on them, so the core can scrub them from anything a plugin says.
   */
  | { t: 'secrets'; secrets: string[] }
  /** `revision`: the settings the plugin was started on (PluginSettings.revision); an init for another is stale. */
  | { t: 'init'; plugin: string; ok: true; revision: string }
  | { t: 'init'; plugin: string; ok: false; category: InitFailureCategory; detail: string; revision: string }
  /** A plugin's process ended while it ran: its tools are unavailable until its next `init` (none when not `restarting`). */
  | { t: 'plugin_down'; plugin: string; detail: string; restarting: boolean }
  | { t: 'response'; rid: string; outcome: HandlerOutcome }
  | { t: 'hook_result'; hid: string; ok: boolean; value?: unknown; detail?: string }
  | { t: 'service'; sid: string; plugin: string; rid: string | null; group: string | null; method: ServiceMethod; args: JsonObject }
  | { t: 'stopped'; results: { plugin: string; outcome: 'clean' | 'timeout' | 'error'; detail?: string }[] };

export type CoreToHost =
  | { t: 'request'; rid: string; plugin: string; envelope: RequestEnvelope }
  | { t: 'hook'; hid: string; plugin: string; hook: 'memory_brief'; group: string }
  | { t: 'hook'; hid: string; plugin: string; hook: 'describe_call'; group: string; tool: string; arguments: JsonObject }
  /**
   * The plugin's connection check (its handler module's `checkConnections`), for the Checks
   * page: in its running process, or, when it is not running (it failed to start), in a
   * process started for the check alone. The value is a list of results (sdk/connection-check.ts).
   */
  | { t: 'hook'; hid: string; plugin: string; hook: 'connection_check' }
  /** `code` on a refusal: why, as a value (e.g. UNAUTHORIZED: the plugin lacks that power). */
  | { t: 'service_result'; sid: string; ok: boolean; value?: unknown; message?: string; code?: string }
  /** The request's deadline passed: abort its handler's signal; its final answer still comes as a `response`. */
  | { t: 'cancel'; rid: string }
  /** The host's hello named a protocol version this core does not speak: it is not linked. */
  | { t: 'refused'; code: 'UNSUPPORTED_VERSION'; message: string; speaks: number[] }
  | { t: 'shutdown'; drain_ms: number; shutdown_ms: number }
  /** The core does not know this host (it restarted): say hello and every init result again. */
  | { t: 'register' }
  /**
   * What to run on: the answer to every new hello and sent again when carapace.json
   * changes. A plugin whose revision differs from the one it runs is started again on the
   * new settings, unless it is in `applied_live` (the plugin took the change itself, such as
   * a chat pairing added): then only its settings for a later start are replaced.
   */
  | { t: 'configuration'; configuration: HostConfiguration; applied_live?: string[]; lane_token?: string }
  /**
   * The event the host named `id` (PublishedEvent.id) is the core's now: accepted, refused
   * for good, or `held` (why: the configuration does not allow it yet; it is kept and
   * handled once it does). Its plugin may save its progress.
   */
  | { t: 'received'; id: string; held?: string };

/** Events travel on the PUB/SUB bus; the first frame is "<plugin> <topic>" so each
 *  plugin subscribes only to what the core addressed to it. */
export interface PublishedEvent {
  plugin: string;
  group: string;
  payload: JsonObject;
  /** The protocol version of this event (PROTOCOL_VERSION); another is refused. */
  version: number;
  /** The event's name at its source: one event per key is accepted (see CoreServices.publish). */
  key?: string;
  /** The host's name for it: the core answers `received` with it, and refuses a repeat of an event without a key by it. */
  id?: string;
}

export type DeliveredEvent = EventEnvelope;

/** The largest event body the plugin host publishes (the core's bus cuts a connection that sends one over twice this). */
export const MAX_EVENT_BYTES = 1024 * 1024;

export const SOCKETS = {
  pluginHost: 'plugins.sock',
  /** Each plugin process's request lane to the core (plugins/request-lanes.ts). */
  lanes: 'lanes.sock',
  busOut: 'bus-out.sock',
  busIn: 'bus-in.sock',
  sessions: 'sessions',
  /** Plugin panels' HTTP sockets, `<panels>/<plugin>.sock` (plugin-host/panel-server.ts). */
  panels: 'panels',
  /** Not a socket: the plugin host's health file, fresh while it is linked to the core. */
  pluginHostHealth: 'plugin-host.health',
} as const;

/**
 * The bus address of the core's last event before it asks the host to shut down (no plugin
 * name starts with "."): the bus keeps order, so a host that has seen it has every event
 * published before (a withdrawn prompt's edit), whatever its link to the core delivered first.
 */
export const BUS_DRAINED = '.host drained';

/**
 * A plugin process's request lane (plugins/request-lanes.ts): JSON lines on a unix socket
 * the host connects, vouches for with `hello` and hands to the process. The core sends
 * requests and cancels on it; the process sends only the responses.
 */
export type LaneHello = { t: 'lane'; plugin: string; token: string };
export type CoreToLane = { t: 'request'; rid: string; envelope: RequestEnvelope } | { t: 'cancel'; rid: string };
export type LaneToCore = { t: 'response'; rid: string; outcome: HandlerOutcome };
