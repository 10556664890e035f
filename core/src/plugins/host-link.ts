// The core's end of the plugin host connection: sends validated envelopes to handlers,
// enforces the handler deadline, answers service calls. A host that dies or hangs costs
// the callers a structured error, never the core.
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import * as zmq from 'zeromq';
import { FrameBatch, parseFrames } from '../boundary/frame-batch.js';
import { SendQueue } from '../boundary/send-queue.js';
import type { JsonObject, RequestEnvelope } from '../protocol/envelope.js';
import { HOST_LINK_VERSION, type CoreToHost, type HandlerOutcome, type HostConfiguration, type HostToCore } from './host-protocol.js';
import { RequestLanes } from './request-lanes.js';

/**
 * `unknown`: the request reached the host, which went away before answering.
 * `timeout`: the deadline passed and the handler was aborted; `stopped` when it said,
 * within the grace period, that it stopped before acting; otherwise `late` is what it
 * ended with in the grace period (absent: no word yet; a `late` event reports it later).
 */
export type InvokeOutcome = Exclude<HandlerOutcome, { kind: 'stopped' } | { kind: 'lost' }> | { kind: 'timeout'; stopped: boolean; late?: HandlerOutcome['kind'] } | { kind: 'unknown' };

interface InFlight {
  plugin: string;
  group: string;
  session: string;
  correlation: string;
  topic: string;
  /** Set at the deadline: the handler was asked to abort; its answer now only says whether it stopped. */
  cancelled: boolean;
  finish: (outcome: InvokeOutcome) => void;
  /** The kept files the request hands the plugin (its file arguments): the ones it may read. */
  files?: string[];
  /** Sent on the plugin's request lane, not through the host (its cancel goes the same way). */
  lane: boolean;
}

/** A request answered at its deadline whose handler has not said yet how it ended. */
export interface LateAnswer {
  plugin: string;
  group: string;
  session: string;
  correlation: string;
  topic: string;
  outcome: HandlerOutcome['kind'];
}

/** Timed-out requests remembered for their handler's final word (the oldest forgotten beyond this). */
const MAX_AWAITING_FINAL_WORD = 1000;
/** Receipts kept for a host not linked yet: more than it holds unconfirmed (bus-publisher.ts: 1000 a plugin). */
const MAX_UNSAID_RECEIPTS = 10_000;

export interface HostLinkEvents {
  hello: [Extract<HostToCore, { t: 'hello' }>];
  secrets: [Extract<HostToCore, { t: 'secrets' }>];
  init: [Extract<HostToCore, { t: 'init' }>];
  pluginDown: [Extract<HostToCore, { t: 'plugin_down' }>];
  service: [Extract<HostToCore, { t: 'service' }>, (reply: Extract<CoreToHost, { t: 'service_result' }>) => void];
  stopped: [Extract<HostToCore, { t: 'stopped' }>];
  down: [];
  /** A host whose hello named a protocol version this core does not speak (it was refused). */
  refused: [{ version: unknown; pid: unknown }];
  /** The final word of a handler that was aborted at its deadline, after the caller was answered. */
  late: [LateAnswer];
  /** A plugin's process broke its request lane's rules (the lane is closed; its requests go through the host). */
  laneFault: [{ plugin: string; detail: string }];
}

export class PluginHostLink extends EventEmitter<HostLinkEvents> {
  private readonly router = new zmq.Router({ linger: 0, mandatory: true, heartbeatInterval: 1000, heartbeatTimeout: 5000 });
  private readonly queue = new SendQueue((frames) => this.router.send(frames));
  private readonly batch = new FrameBatch((frame) =>
    this.host ? this.queue.push([this.host, frame]) : Promise.reject(new Error('plugin host not connected')),
  );
  private host: Buffer | null = null;
  /** Requests straight to the plugins' processes (request-lanes.ts). */
  private readonly lanes = new RequestLanes({
    response: (plugin, rid, outcome) => {
      if ((this.inFlight.get(rid)?.plugin ?? this.awaitingFinalWord.get(rid)?.plugin) === plugin) this.answered(rid, outcome);
    },
    lost: (plugin, rids) => {
      for (const rid of rids) {
        const entry = this.inFlight.get(rid);
        if (entry?.plugin === plugin) entry.finish(entry.cancelled ? { kind: 'timeout', stopped: false } : { kind: 'unknown' });
        if (this.awaitingFinalWord.get(rid)?.plugin === plugin) this.awaitingFinalWord.delete(rid);
      }
    },
    fault: (plugin, detail) => this.emit('laneFault', { plugin, detail }),
  });

  /** A plugin host is linked now (the console's overview). */
  get connected(): boolean {
    return this.host !== null;
  }
  /** Hosts asked to register since the last hello: asked once each, not per message. */
  private readonly asked = new Set<string>();
  /** The settings revision each plugin's init result was for, on this host connection: a registration said twice counts once. */
  private readonly initialized = new Map<string, string>();
  private readonly inFlight = new Map<string, InFlight>();
  /** describe_call hooks running: like a request, their plugin may read that group's audit log. */
  private readonly describing = new Map<string, { plugin: string; group: string; session: string }>();
  private readonly awaitingFinalWord = new Map<string, Omit<LateAnswer, 'outcome'>>();
  private readonly hooks = new Map<string, (r: Extract<HostToCore, { t: 'hook_result' }>) => void>();
  private loops: Promise<void>[] = [];
  /** `received` for events that came before any host's hello. */
  private unsaid: { id: string; held?: string }[] = [];

  /** `lanes`: where plugins' processes get their request lanes (SOCKETS.lanes). */
  async open(endpoint: string, lanes: string): Promise<void> {
    await this.router.bind(endpoint);
    await this.lanes.open(lanes);
    this.loops = [this.receive(), this.watch()];
  }

  /**
   * A dropped connection (crash, kill, heartbeat timeout) means the host is gone. (A
   * disconnect names no peer: another connection closing, such as a host refused for its
   * version, reads the same. A probe send to the host cannot tell either: to a peer just
   * gone it may wait instead of failing.)
   */
  private async watch(): Promise<void> {
    try {
      for await (const event of this.router.events) if (event.type === 'disconnect') this.hostLost();
    } catch {
      // the socket closed
    }
  }

  /** Requests currently with a handler, by plugin: what the drain phase waits for. */
  inFlightFor(plugin: string): number {
    let n = 0;
    for (const f of this.inFlight.values()) if (f.plugin === plugin) n++;
    return n;
  }

  /** The request a service call claims to run under, so the core can scope it. */
  requestContext(rid: string): { plugin: string; group: string; session: string; files?: string[] } | undefined {
    return this.inFlight.get(rid) ?? this.describing.get(rid);
  }

  /**
   * At `timeoutMs` the handler's signal is aborted (a `cancel`); the caller is answered
   * once the handler has said how it ended, or after `graceMs` without a word.
   */
  invoke(plugin: string, envelope: RequestEnvelope, session: string, timeoutMs: number, graceMs = 0, files?: string[]): Promise<InvokeOutcome> {
    if (!this.host) return Promise.resolve({ kind: 'unavailable' });
    const rid = randomUUID();
    return new Promise((resolve) => {
      let timer = setTimeout(() => {
        const entry = this.inFlight.get(rid);
        if (!entry) return;
        entry.cancelled = true;
        if (!entry.lane || !this.lanes.send(plugin, { t: 'cancel', rid })) void this.send({ t: 'cancel', rid }).catch(() => undefined);
        timer = setTimeout(() => {
          // No word in the grace period: the handler may still act. Its final word is audited when it comes.
          this.awaitFinalWord(rid, entry);
          finish({ kind: 'timeout', stopped: false });
        }, graceMs);
      }, timeoutMs);
      const finish = (outcome: InvokeOutcome): void => {
        if (!this.inFlight.delete(rid)) return;
        clearTimeout(timer);
        resolve(outcome);
      };
      const entry: InFlight = { plugin, group: envelope.group, session, correlation: envelope.correlation, topic: envelope.topic, cancelled: false, finish, files, lane: false };
      this.inFlight.set(rid, entry);
      entry.lane = this.lanes.send(plugin, { t: 'request', rid, envelope });
      // Not sent: nothing can have acted. Sent: only the handler's answer says what happened.
      if (!entry.lane) this.send({ t: 'request', rid, plugin, envelope }).catch(() => finish({ kind: 'unavailable' }));
    });
  }

  /** memory_brief, or describe_call when `call` is given (for a call in `call.session`, '' for none). */
  callHook(plugin: string, group: string, timeoutMs: number, call?: { tool: string; arguments: JsonObject; session: string }): Promise<{ ok: boolean; value?: unknown; detail?: string }> {
    return this.hook(timeoutMs, (hid) => {
      if (call) this.describing.set(hid, { plugin, group, session: call.session });
      return call ? { t: 'hook', hid, plugin, hook: 'describe_call', group, tool: call.tool, arguments: call.arguments } : { t: 'hook', hid, plugin, hook: 'memory_brief', group };
    });
  }

  /** The plugin's connection check (in its process, or one started for it): its results, or why there are none. */
  connectionCheck(plugin: string, timeoutMs: number): Promise<{ ok: boolean; value?: unknown; detail?: string }> {
    return this.hook(timeoutMs, (hid) => ({ t: 'hook', hid, plugin, hook: 'connection_check' }));
  }

  private hook(timeoutMs: number, message: (hid: string) => Extract<CoreToHost, { t: 'hook' }>): Promise<{ ok: boolean; value?: unknown; detail?: string }> {
    if (!this.host) return Promise.resolve({ ok: false, detail: 'plugin host not connected' });
    const hid = randomUUID();
    return new Promise((resolve) => {
      const timer = setTimeout(() => done({ t: 'hook_result', hid, ok: false, detail: `timed out after ${timeoutMs} ms` }), timeoutMs);
      const done = (r: Extract<HostToCore, { t: 'hook_result' }>): void => {
        if (!this.hooks.delete(hid)) return;
        this.describing.delete(hid);
        clearTimeout(timer);
        resolve(r);
      };
      this.hooks.set(hid, done);
      this.send(message(hid)).catch(() => done({ t: 'hook_result', hid, ok: false, detail: 'send failed' }));
    });
  }

  /** Asks the host to run every handler's shutdown(); resolves with its report or null. */
  async shutdown(drainMs: number, shutdownMs: number): Promise<Extract<HostToCore, { t: 'stopped' }> | null> {
    if (!this.host) return null;
    const stopped = new Promise<Extract<HostToCore, { t: 'stopped' }> | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), drainMs + shutdownMs + 1000);
      this.once('stopped', (m) => {
        clearTimeout(timer);
        resolve(m);
      });
    });
    await this.send({ t: 'shutdown', drain_ms: drainMs, shutdown_ms: shutdownMs }).catch(() => undefined);
    return stopped;
  }

  /**
   * An event the host published is accepted or refused for good (see Core.onPublished).
   * Said once a host is linked if none is yet (the bus may bring a restarted core the
   * host's events before its hello); a host that died meanwhile does not need it.
   */
  received(id: string, held?: string): void {
    if (!this.host) {
      this.unsaid.push({ id, held });
      if (this.unsaid.length > MAX_UNSAID_RECEIPTS) this.unsaid.shift();
      return;
    }
    void this.send({ t: 'received', id, ...(held === undefined ? {} : { held }) }).catch(() => undefined);
  }

  /** What the linked host is to run on (see the `configuration` message); false: no host is linked. */
  configure(configuration: HostConfiguration, appliedLive: string[] = []): boolean {
    if (!this.host) return false;
    void this.send({ t: 'configuration', configuration, ...(appliedLive.length > 0 ? { applied_live: appliedLive } : {}), lane_token: this.lanes.token }).catch(() => undefined);
    return true;
  }

  private send(message: CoreToHost): Promise<void> {
    if (!this.host) return Promise.reject(new Error('plugin host not connected'));
    return this.batch.push(JSON.stringify(message));
  }

  private async receive(): Promise<void> {
    try {
      // The host batches too (boundary/frame-batch.ts).
      for await (const [identity, ...frames] of this.router) {
        for (const message of parseFrames<HostToCore>(frames)) this.dispatch(identity, message);
      }
    } catch (err) {
      if (!this.router.closed) throw err;
    }
  }

  private dispatch(identity: Buffer, message: HostToCore): void {
    if (message.t !== 'hello' && !this.host?.equals(identity)) {
      // A host this core never heard say hello: the core restarted under it. Whatever it
      // answers belongs to the old core; ask it to register again.
      const key = identity.toString('hex');
      if (!this.asked.has(key)) {
        this.asked.add(key);
        void this.queue.push([identity, JSON.stringify({ t: 'register' } satisfies CoreToHost)]).catch(() => undefined);
      }
      return;
    }
    switch (message.t) {
      case 'hello':
        // A host speaking another protocol is not linked: everything it would say could be misread.
        if (message.version !== HOST_LINK_VERSION) {
          const refused: CoreToHost = { t: 'refused', code: 'UNSUPPORTED_VERSION', message: `this core speaks protocol version ${HOST_LINK_VERSION}, not ${JSON.stringify(message.version ?? null).slice(0, 16)}`, speaks: [HOST_LINK_VERSION] };
          void this.queue.push([identity, JSON.stringify(refused)]).catch(() => undefined);
          this.emit('refused', { version: message.version, pid: message.pid });
          break;
        }
        // The same connection saying hello again (it registered on reconnecting and was
        // asked to as well): nothing was lost, nothing to redo.
        if (this.host?.equals(identity)) break;
        // A new host (first start or restart): requests held by the old one are lost.
        this.failAll();
        this.host = identity;
        this.asked.clear();
        this.initialized.clear();
        this.emit('hello', message);
        for (const { id, held } of this.unsaid.splice(0)) this.received(id, held);
        break;
      case 'secrets':
        if (Array.isArray(message.secrets)) this.emit('secrets', message);
        break;
      case 'init':
        if (this.initialized.get(message.plugin) === message.revision) break;
        this.initialized.set(message.plugin, message.revision);
        this.emit('init', message);
        break;
      case 'response':
        this.answered(message.rid, message.outcome);
        break;
      case 'hook_result':
        this.hooks.get(message.hid)?.(message);
        break;
      case 'service':
        this.emit('service', message, (reply) => void this.send(reply).catch(() => undefined));
        break;
      case 'stopped':
        this.emit('stopped', message);
        break;
      case 'plugin_down':
        // Its next init (after a restart) is news, not a registration said twice.
        this.initialized.delete(message.plugin);
        this.emit('pluginDown', message);
        break;
    }
  }

  private answered(rid: string, outcome: HandlerOutcome): void {
    const entry = this.inFlight.get(rid);
    if (entry?.cancelled) {
      entry.finish(outcome.kind === 'stopped' ? { kind: 'timeout', stopped: true } : { kind: 'timeout', stopped: false, late: outcome.kind });
      return;
    }
    if (entry) {
      // 'stopped' without an abort is a handler's mistake: it is no answer the agent can use.
      if (outcome.kind === 'stopped') entry.finish({ kind: 'crash', detail: 'the handler threw AbortedBeforeActing although its request was not aborted' });
      else if (outcome.kind === 'lost') entry.finish({ kind: 'unknown' });
      else entry.finish(outcome);
      return;
    }
    const waiting = this.awaitingFinalWord.get(rid);
    if (!waiting) return;
    this.awaitingFinalWord.delete(rid);
    this.emit('late', { ...waiting, outcome: outcome.kind });
  }

  private awaitFinalWord(rid: string, entry: InFlight): void {
    this.awaitingFinalWord.set(rid, { plugin: entry.plugin, group: entry.group, session: entry.session, correlation: entry.correlation, topic: entry.topic });
    if (this.awaitingFinalWord.size > MAX_AWAITING_FINAL_WORD) this.awaitingFinalWord.delete(this.awaitingFinalWord.keys().next().value as string);
  }

  private failAll(): void {
    // A host that went away will not say how those handlers ended.
    this.awaitingFinalWord.clear();
    for (const f of [...this.inFlight.values()]) f.finish({ kind: 'unknown' });
    for (const [hid, done] of [...this.hooks]) done({ t: 'hook_result', hid, ok: false, detail: 'plugin host restarted' });
  }

  private hostLost(): void {
    if (!this.host) return;
    this.host = null;
    this.failAll();
    this.emit('down');
  }

  async close(): Promise<void> {
    this.failAll();
    await this.lanes.close();
    this.router.close();
    await Promise.all(this.loops.map((l) => l.catch(() => undefined)));
  }
}
