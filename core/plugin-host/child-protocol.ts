// Messages between the plugin host (the supervisor) and one plugin's own process (the
// runner), JSON lines over a socket pair (runner-channel.ts bounds what a runner sends; Node's own
// IPC channel let one line of garbage end the host). The supervisor is trusted, the runner is not: the
// supervisor says which plugin every message from a runner is about, never the runner.
import type { HandlerOutcome, ServiceMethod } from '../src/plugins/host-protocol.js';
import type { EventEnvelope, JsonObject, RequestEnvelope } from '../src/protocol/envelope.js';
import type { InitFailureCategory } from '../src/protocol/errors.js';

export interface StartMessage {
  t: 'start';
  plugin: string;
  /** Resolved (real) path: the runner may not be able to follow the plugins folder's links. */
  handlerFile: string;
  /** Its own configuration, secrets filled in: the only secrets this process ever holds. */
  config: JsonObject;
  dataDir: string;
  initTimeoutMs: number;
  /** Where to serve its panel (HTTP on a unix socket only the supervisor reaches), if it has one. */
  panelSocket: string | null;
  /** Its way out: a CONNECT proxy on loopback that only this plugin's token opens (egress-relay.ts). */
  egressProxy: string | null;
  /** 'check': a process for a connection check alone (the plugin is not running): its handler is loaded, never initialized. */
  mode?: 'check';
}

export type HookMessage =
  | { t: 'hook'; hid: string; hook: 'memory_brief'; group: string }
  | { t: 'hook'; hid: string; hook: 'describe_call'; group: string; tool: string; arguments: JsonObject }
  | { t: 'hook'; hid: string; hook: 'connection_check' };

export type SupervisorToRunner =
  | StartMessage
  | { t: 'request'; rid: string; envelope: RequestEnvelope }
  | { t: 'cancel'; rid: string }
  | HookMessage
  | { t: 'event'; envelope: EventEnvelope }
  | { t: 'service_result'; sid: string; ok: boolean; value?: unknown; message?: string; code?: string }
  | { t: 'ping'; n: number }
  /** The core has the event this id published (bus-publisher.ts): the plugin may save its progress. `refused`: it was not published, and why; `held`: the core keeps it, unhandled, until the configuration allows it (why). */
  | { t: 'published'; id: number; refused?: string; held?: string }
  | { t: 'shutdown'; shutdown_ms: number };

export type StopOutcome = { outcome: 'clean' | 'timeout' | 'error'; detail?: string };

export type RunnerToSupervisor =
  | { t: 'init'; ok: true }
  | { t: 'init'; ok: false; category: InitFailureCategory; detail: string }
  | { t: 'response'; rid: string; outcome: HandlerOutcome }
  | { t: 'hook_result'; hid: string; ok: boolean; value?: unknown; detail?: string }
  | { t: 'service'; sid: string; rid: string | null; group: string | null; method: ServiceMethod; args: JsonObject }
  | { t: 'publish'; id: number; topic: string; group: string; payload: JsonObject; key?: string }
  | { t: 'pong'; n: number }
  | ({ t: 'stopped' } & StopOutcome);
