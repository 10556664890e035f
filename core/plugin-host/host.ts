// The plugin host: a separate process that runs every plugin's handler, so a crashing
// or hanging handler can never take the core down. It talks to the core over the
// private plugin socket and the event bus; the core has already validated everything.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname, join } from 'node:path';
import * as zmq from 'zeromq';
import pino from 'pino';
import { FrameBatch, parseFrames } from '../src/boundary/frame-batch.js';
import { SendQueue } from '../src/boundary/send-queue.js';
import type { CoreConfig } from '../src/config.js';
import { INTRINSIC_NAMES } from '../src/intrinsics/intrinsics.js';
import { discoverPlugins, type DiscoveredPlugin } from '../src/plugins/discovery.js';
import { SOCKETS, type CoreToHost, type HandlerOutcome, type HostToCore, type ServiceMethod } from '../src/plugins/host-protocol.js';
import { PROTOCOL_VERSION, type EventEnvelope, type JsonObject, type RequestEnvelope } from '../src/protocol/envelope.js';
import { APP_VERSION } from '../src/version.js';
import { AbortedBeforeActing, ServiceError, ToolError, type CoreServices, type PluginHandler } from '../sdk/index.js';
import { categorize, handlerPath, loadHandler, TimeoutError } from './load-handler.js';
import { servePanel } from './panel-server.js';
import { BusPublisher } from './bus-publisher.js';
import { CorePresence } from './core-presence.js';
import { pluginSection, resolvePluginConfig } from './plugin-config.js';
import { pluginInStack, StrayErrors } from './stray-errors.js';

export interface HostOptions {
  runDir: string;
  pluginsDir: string;
  handlersDir: string;
  dataDir: string;
  config: CoreConfig;
  env?: NodeJS.ProcessEnv;
  /** A core away (or never there) for longer than this: the host gives up and onCoreLost runs. */
  coreLostAfterMs?: number;
}

/** The default bound on a core's absence: far longer than a restart takes. */
const CORE_LOST_AFTER_MS = 120_000;
/** Plugin events held for an absent core, kept here when the host gives up waiting. */
const HELD_EVENTS_FILE = '.held-events.json';

interface Loaded {
  plugin: DiscoveredPlugin;
  handler: PluginHandler;
  config: JsonObject;
}

interface Context {
  plugin: string;
  rid: string | null;
  group: string | null;
}

const SERVICE_TIMEOUT_MS = 5000;
const log = pino({ base: { service: 'plugin-host' } }, pino.destination(2));

/** Plain JSON data only: what the core can forward unchanged. */
export function isJsonData(value: unknown, seen = new Set<object>()): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object') return false;
  if (seen.has(value)) return false;
  seen.add(value);
  const proto = Object.getPrototypeOf(value) as unknown;
  const ok = Array.isArray(value)
    ? value.every((v) => isJsonData(v, seen))
    : (proto === Object.prototype || proto === null) && Object.values(value).every((v) => v === undefined || isJsonData(v, seen));
  seen.delete(value);
  return ok;
}

export class PluginHost {
  private readonly dealer = new zmq.Dealer({ linger: 0, heartbeatInterval: 1000, heartbeatTimeout: 5000, reconnectInterval: 100 });
  private readonly sub = new zmq.Subscriber({ linger: 0 });
  private readonly bus = new BusPublisher(() => log.warn({ count: 1 }, 'core away too long: oldest held events dropped'));
  private readonly dealerQueue = new SendQueue((frames) => this.dealer.send(frames));
  private readonly toCore = new FrameBatch((frames) => this.dealerQueue.push(frames));
  private readonly loaded = new Map<string, Loaded>();
  /** Plugin panels' HTTP servers (panel-server.ts), closed at stop. */
  private readonly panels: Server[] = [];
  private readonly calls = new Map<string, (r: Extract<CoreToHost, { t: 'service_result' }>) => void>();
  private readonly context = new AsyncLocalStorage<Context>();
  /** Each request's abort controller, aborted when the core says its deadline passed. */
  private readonly controllers = new Map<string, AbortController>();
  /** Each plugin's handler folder: a stack trace through it names the plugin (stray errors). */
  private readonly handlerDirs = new Map<string, string>();
  private inFlight = 0;
  /** hello and every init result so far: said again to a core that restarted. */
  private readonly registration: HostToCore[] = [];
  private stopping: Promise<void> | null = null;
  private loops: Promise<void>[] = [];
  private readonly presence: CorePresence;
  onStopped: () => void = () => undefined;
  onCoreLost: () => void = () => undefined;

  constructor(private readonly options: HostOptions) {
    this.presence = new CorePresence(join(options.runDir, SOCKETS.pluginHostHealth), options.coreLostAfterMs ?? CORE_LOST_AFTER_MS, () => this.coreLost());
  }

  /** The core stayed away too long: keep what waits for it on disk, then let the process end. */
  private coreLost(): void {
    const saved = this.bus.saveHeld(join(this.options.dataDir, HELD_EVENTS_FILE));
    log.error({ after_ms: this.options.coreLostAfterMs ?? CORE_LOST_AFTER_MS, held_events_saved: saved }, 'the core is gone: giving up');
    this.onCoreLost();
  }

  async start(): Promise<void> {
    const { runDir } = this.options;
    // Watching first: a socket monitor misses what happened before it existed (such as
    // the first handshake with a core that is already there).
    this.presence.unlinked();
    this.loops.push(this.receiveCore(), this.receiveEvents(), this.watchCore());
    this.dealer.connect(`ipc://${join(runDir, SOCKETS.pluginHost)}`);
    this.sub.connect(`ipc://${join(runDir, SOCKETS.busOut)}`);
    this.bus.connect(`ipc://${join(runDir, SOCKETS.busIn)}`);
    mkdirSync(this.options.dataDir, { recursive: true });
    const restored = this.bus.restoreHeld(join(this.options.dataDir, HELD_EVENTS_FILE));
    if (restored > 0) log.info({ events: restored }, 'events an earlier plugin host held for the core: published first');

    const { plugins } = discoverPlugins(this.options.pluginsDir, APP_VERSION, INTRINSIC_NAMES);
    const secrets: string[] = [];
    const failures: Extract<HostToCore, { t: 'init' }>[] = [];
    const pending: Loaded[] = [];
    for (const plugin of plugins) {
      const resolved = resolvePluginConfig(pluginSection(this.options.config.plugins, plugin.name), plugin.manifest.config_schema, this.options.env ?? process.env);
      if (!resolved.ok) {
        failures.push({ t: 'init', plugin: plugin.name, ok: false, category: resolved.notConfigured ? 'NOT_CONFIGURED' : 'CONFIG_ERROR', detail: resolved.reason });
        continue;
      }
      secrets.push(...resolved.secrets);
      const file = handlerPath(plugin.name, plugin.dir, this.options.handlersDir);
      if (!file) {
        failures.push({ t: 'init', plugin: plugin.name, ok: false, category: 'CONFIG_ERROR', detail: 'no handler.js found (was the project built?)' });
        continue;
      }
      this.handlerDirs.set(plugin.name, dirname(file));
      try {
        pending.push({ plugin, handler: await this.context.run({ plugin: plugin.name, rid: null, group: null }, () => loadHandler(file)), config: resolved.config });
      } catch (err) {
        failures.push({ t: 'init', plugin: plugin.name, ok: false, category: categorize(err), detail: String((err as Error)?.stack ?? err) });
      }
    }
    // Secrets first, so the core can scrub them from anything a handler says later.
    await this.registered({ t: 'hello', pid: process.pid, secrets, version: PROTOCOL_VERSION });
    for (const failure of failures) await this.registered(failure);
    await Promise.all(pending.map((entry) => this.initialize(entry)));
  }

  private async initialize(entry: Loaded): Promise<void> {
    const name = entry.plugin.name;
    const dataDir = join(this.options.dataDir, name);
    mkdirSync(dataDir, { recursive: true });
    try {
      // In the plugin's context: what it starts here (a polling loop) stays attributable to it.
      const started = this.context.run({ plugin: name, rid: null, group: null }, () => entry.handler.initialize(entry.config, this.services(name, dataDir)));
      await withTimeout(started, this.options.config.handler_timeout_ms, 'initialize()');
      const handler = entry.handler;
      if (entry.plugin.manifest.panel && handler.servePanel) {
        this.panels.push(await servePanel(this.options.runDir, name, (req, res) => this.context.run({ plugin: name, rid: null, group: null }, () => handler.servePanel!(req, res))));
      }
      this.loaded.set(name, entry);
      for (const prefix of entry.plugin.manifest.subscribes) this.sub.subscribe(`${name} ${prefix}`);
      await this.registered({ t: 'init', plugin: name, ok: true });
    } catch (err) {
      log.error({ plugin: name, err }, 'initialize failed');
      await this.registered({ t: 'init', plugin: name, ok: false, category: categorize(err), detail: String((err as Error)?.stack ?? err) });
    }
  }

  /** Sends a registration message and keeps it for the next core. */
  private registered(message: HostToCore): Promise<void> {
    this.registration.push(message);
    return this.send(message);
  }

  /** Says hello and every init result again, in their order, to a (new) core. */
  private register(): void {
    for (const message of this.registration) void this.send(message).catch(() => undefined);
  }

  /**
   * Every connection after the first is a core that restarted (crash, kill -9, update):
   * it knows nothing of this host until told. (The core also asks, with "register",
   * when it hears from a host it does not know.)
   */
  private async watchCore(): Promise<void> {
    let connections = 0;
    try {
      for await (const event of this.dealer.events) {
        if (event.type === 'disconnect') {
          log.warn('lost the link to the core');
          this.presence.unlinked();
        }
        if (event.type !== 'handshake') continue;
        log.info('linked to the core');
        this.presence.linked();
        if (++connections > 1 && this.registration.length > 0) {
          log.info({ connection: connections }, 'core connected again: registering');
          this.register();
        }
      }
    } catch {
      // the socket closed
    }
  }

  private services(plugin: string, dataDir: string): CoreServices {
    const scoped = (): Context => {
      const store = this.context.getStore();
      return store && store.plugin === plugin ? store : { plugin, rid: null, group: null };
    };
    const call = (method: ServiceMethod, args: JsonObject, group: string | null = scoped().group) =>
      this.callCore(plugin, scoped().rid, group, method, args);
    return {
      dataDir,
      getAuditLog: (filters = {}) => call('getAuditLog', { ...filters }) as Promise<never>,
      getToolCatalog: () => call('getToolCatalog', {}) as Promise<never>,
      getSessionInfo: () => call('getSessionInfo', {}) as Promise<never>,
      listConfirmations: (group) => call('listConfirmations', {}, group) as Promise<never>,
      confirmationStatus: (id) => call('confirmationStatus', { id }, null) as Promise<never>,
      notifyUser: (group, text) => call('notifyUser', { text }, group) as Promise<boolean>,
      reportFault: (message, group) => call('reportFault', { message }, group ?? null).then(() => undefined),
      resolveConfirmation: (id, approve, by, group, allowHours, hash) =>
        call('resolveConfirmation', { id, approve, by, ...(allowHours === undefined ? {} : { allow_hours: allowHours }), ...(hash === undefined ? {} : { hash }) }, group) as Promise<boolean | 'stale'>,
      requestPairing: (chat, details) => call('requestPairing', { chat, ...details }, null) as Promise<never>,
      publish: (topic, group, payload, options) => {
        this.bus.publish([Buffer.from(topic), Buffer.from(JSON.stringify({ plugin, group, payload, key: options?.key, version: PROTOCOL_VERSION }))]);
      },
    };
  }

  private callCore(plugin: string, rid: string | null, group: string | null, method: ServiceMethod, args: JsonObject): Promise<unknown> {
    const sid = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done({ t: 'service_result', sid, ok: false, message: 'core did not answer' }), SERVICE_TIMEOUT_MS);
      const done = (r: Extract<CoreToHost, { t: 'service_result' }>): void => {
        if (!this.calls.delete(sid)) return;
        clearTimeout(timer);
        if (r.ok) resolve(r.value);
        else reject(new ServiceError(r.code ?? 'SERVICE_FAILED', `${method}: ${r.message ?? 'failed'}`));
      };
      this.calls.set(sid, done);
      this.send({ t: 'service', sid, plugin, rid, group, method, args }).catch(() => done({ t: 'service_result', sid, ok: false, message: 'send failed' }));
    });
  }

  private async handleRequest(rid: string, plugin: string, envelope: RequestEnvelope): Promise<void> {
    const entry = this.loaded.get(plugin);
    if (!entry || this.stopping) {
      await this.send({ t: 'response', rid, outcome: { kind: 'unavailable' } });
      return;
    }
    this.inFlight++;
    const controller = new AbortController();
    this.controllers.set(rid, controller);
    let outcome: HandlerOutcome;
    try {
      const result = await this.context.run({ plugin, rid, group: envelope.group }, () => entry.handler.handleRequest(envelope, { signal: controller.signal }));
      outcome = isJsonData(result) ? { kind: 'result', result } : { kind: 'crash', detail: 'handler returned a value that is not plain JSON data' };
    } catch (err) {
      // instanceof against the one SDK module: a look-alike error is treated as a crash.
      if (err instanceof AbortedBeforeActing) outcome = controller.signal.aborted ? { kind: 'stopped' } : { kind: 'crash', detail: 'AbortedBeforeActing thrown although the request was not aborted' };
      else if (err instanceof ToolError) outcome = { kind: 'tool_error', code: err.code, message: String(err.message), retriable: err.retriable === true };
      else outcome = { kind: 'crash', detail: String((err as Error)?.stack ?? err) };
    } finally {
      this.inFlight--;
      this.controllers.delete(rid);
    }
    await this.send({ t: 'response', rid, outcome });
  }

  private async handleHook(message: Extract<CoreToHost, { t: 'hook' }>): Promise<void> {
    const entry = this.loaded.get(message.plugin);
    try {
      const handler = entry?.handler;
      // A description is asked for one call: its services are scoped to it like a request's.
      const scope = { plugin: message.plugin, rid: message.hook === 'describe_call' ? message.hid : null, group: message.group };
      let value: unknown;
      if (message.hook === 'describe_call') {
        if (typeof handler?.describeCall !== 'function') throw new Error('plugin does not provide describeCall');
        value = await this.context.run(scope, () => handler.describeCall!(message.tool, message.arguments, message.group));
      } else {
        if (typeof handler?.getBrief !== 'function') throw new Error('plugin does not provide getBrief');
        value = await this.context.run(scope, () => handler.getBrief!(message.group));
      }
      await this.send({ t: 'hook_result', hid: message.hid, ok: true, value });
    } catch (err) {
      await this.send({ t: 'hook_result', hid: message.hid, ok: false, detail: String((err as Error)?.message ?? err) });
    }
  }

  private async handleEvent(plugin: string, envelope: EventEnvelope): Promise<void> {
    const entry = this.loaded.get(plugin);
    if (!entry || this.stopping || typeof entry.handler.handleEvent !== 'function') return;
    const handler = entry.handler;
    try {
      await this.context.run({ plugin, rid: null, group: envelope.group }, () => handler.handleEvent!(envelope));
    } catch (err) {
      log.error({ plugin, topic: envelope.topic, err }, 'handleEvent failed');
    }
  }

  private async receiveCore(): Promise<void> {
    try {
      // The core batches: every frame is one message.
      for await (const frames of this.dealer) {
        for (const message of parseFrames<CoreToHost>(frames)) {
          if (message.t === 'request') void this.handleRequest(message.rid, message.plugin, message.envelope);
          else if (message.t === 'hook') void this.handleHook(message);
          else if (message.t === 'service_result') this.calls.get(message.sid)?.(message);
          else if (message.t === 'shutdown') void this.stop(message.drain_ms, message.shutdown_ms);
          else if (message.t === 'register') this.register();
          else if (message.t === 'cancel') this.controllers.get(message.rid)?.abort();
          else if (message.t === 'refused') log.fatal({ code: message.code, speaks: message.speaks }, `the core refused this plugin host: ${message.message}`);
        }
      }
    } catch (err) {
      if (!this.dealer.closed) throw err;
    }
  }

  private async receiveEvents(): Promise<void> {
    try {
      for await (const [address, body] of this.sub) {
        const plugin = address.toString('utf8').split(' ', 1)[0];
        try {
          void this.handleEvent(plugin, JSON.parse(body.toString('utf8')) as EventEnvelope);
        } catch {
          continue;
        }
      }
    } catch (err) {
      if (!this.sub.closed) throw err;
    }
  }

  private send(message: HostToCore): Promise<void> {
    return this.toCore.push(Buffer.from(JSON.stringify(message)));
  }

  /**
   * Contains stray rejections and exceptions (stray-errors.ts): one traced to a plugin is
   * its fault, reported; any other ends the process (`fatal`). Returns the removal.
   */
  containStrayErrors(fatal: (kind: string, error: unknown) => void): () => void {
    return new StrayErrors({
      attribute: (error) => this.context.getStore()?.plugin ?? pluginInStack(error, this.handlerDirs),
      report: (plugin, message) => void this.callCore(plugin, null, null, 'reportFault', { message }).catch(() => undefined),
      fatal,
      log,
    }).install();
  }

  /** Drain in-flight requests, then every handler's shutdown() in parallel, bounded. */
  stop(drainMs = this.options.config.handler_timeout_ms, shutdownMs = this.options.config.shutdown_timeout_ms): Promise<void> {
    this.stopping ??= (async () => {
      const deadline = Date.now() + drainMs;
      while (this.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const results = await Promise.all(
        [...this.loaded.values()].map(async ({ plugin, handler }) => {
          try {
            await withTimeout(handler.shutdown?.() ?? Promise.resolve(), shutdownMs, 'shutdown()');
            return { plugin: plugin.name, outcome: 'clean' as const };
          } catch (err) {
            const timedOut = err instanceof TimeoutError;
            return { plugin: plugin.name, outcome: timedOut ? ('timeout' as const) : ('error' as const), detail: String((err as Error)?.message ?? err) };
          }
        }),
      );
      await this.send({ t: 'stopped', results }).catch(() => undefined);
      this.presence.close();
      for (const panel of this.panels) panel.close();
      // Give the report a moment to leave before the sockets close.
      await new Promise((r) => setTimeout(r, 50));
      this.dealer.close();
      this.sub.close();
      // Stopped while the core is away (a stopping core shut this host down, and Compose's
      // restart policy started a fresh one that is stopped in turn): what it holds is kept.
      const saved = this.bus.saveHeld(join(this.options.dataDir, HELD_EVENTS_FILE));
      if (saved > 0) log.warn({ held_events_saved: saved }, 'stopped with events held for the core: kept for the next plugin host');
      await this.bus.close();
      await Promise.all(this.loops.map((l) => l.catch(() => undefined)));
      this.onStopped();
    })();
    return this.stopping;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
