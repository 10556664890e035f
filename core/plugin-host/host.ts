// The plugin host: supervises one process per plugin (plugin-process.ts), so a plugin
// that crashes, hangs or is hostile reaches neither the core nor another plugin. It holds
// the one link to the core (the private plugin socket and the event bus) and says which
// plugin each message is from; the core has already validated everything it sends.
// It never reads carapace.json: the core hands it each plugin's settings (`configuration`,
// the answer to its hello and again whenever the file changes) and it starts again only
// the plugins whose settings changed.
import { randomUUID } from 'node:crypto';
import { mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import pino from 'pino';
import { FrameBatch, parseFrames } from '../src/boundary/frame-batch.js';
import { SendQueue } from '../src/boundary/send-queue.js';
import { INTRINSIC_NAMES } from '../src/intrinsics/intrinsics.js';
import { discoverPlugins, type DiscoveredPlugin } from '../src/plugins/discovery.js';
import { HOST_LINK_VERSION, MAX_EVENT_BYTES, SOCKETS, type CoreToHost, type HostToCore, type PublishedEvent } from '../src/plugins/host-protocol.js';
import { PROTOCOL_VERSION, type JsonObject } from '../src/protocol/envelope.js';
import { onMigration } from '../src/state/format-migrations.js';
import { APP_VERSION } from '../src/version.js';
import { PublicPanels } from './panel-server.js';
import { BusPublisher } from './bus-publisher.js';
import { BusSubscriber } from './bus-subscriber.js';
import { CorePresence } from './core-presence.js';
import { EgressRelay } from './egress-relay.js';
import { endEverythingOf, PluginIds, pluginEnv, prepareDataDir } from './isolation.js';
import { AllowList } from '../src/network/allow-list.js';
import { PluginProcess } from './plugin-process.js';
import { connectionCheck } from './check-process.js';
import { planConfiguration, type PluginStep } from './configuration-plan.js';

export interface HostOptions {
  runDir: string;
  pluginsDir: string;
  handlersDir: string;
  dataDir: string;
  env?: NodeJS.ProcessEnv;
  /** A core away (or never there) for longer than this: the host gives up and onCoreLost runs. */
  coreLostAfterMs?: number;
  /** The egress service's socket (the appliance); unset, plugins' tunnels connect from here. */
  egressSocket?: string | null;
  /** The benchmark's baseline only (bench/single-host.ts): every plugin inside this process, unisolated. */
  inProcessPlugins?: boolean;
}

/** The default bound on a core's absence: far longer than a restart takes. */
const CORE_LOST_AFTER_MS = 120_000;
/** Plugin events the core has not confirmed, kept here when the host stops or gives up waiting. */
const HELD_EVENTS_FILE = '.held-events.json';
/** Each plugin's panel, served by its process in its own folder (relayed: panel-server.ts). */
const PRIVATE_PANEL = '.panel.sock';
/** Bounds until the core's configuration says otherwise (its defaults). */
const DEFAULT_BOUNDS = { handler_timeout_ms: 30_000, shutdown_timeout_ms: 10_000 };

const log = pino({ base: { service: 'plugin-host' } }, pino.destination(2));

/** Where plugins keep their data: `<data>/plugins/<name>/`, nothing else of the data folder. */
export function pluginDataRoot(dataDir: string): string {
  return join(dataDir, 'plugins');
}

export class PluginHost {
  private readonly dealer = new zmq.Dealer({ linger: 0, heartbeatInterval: 1000, heartbeatTimeout: 5000, reconnectInterval: 100 });
  private readonly sub = new BusSubscriber();
  private readonly bus = new BusPublisher((plugin) => log.warn({ plugin }, 'too many events the core has not confirmed: the oldest is given up'));
  private readonly dealerQueue = new SendQueue((frames) => this.dealer.send(frames));
  private readonly toCore = new FrameBatch((frame) => this.dealerQueue.push([frame]));
  private readonly processes = new Map<string, PluginProcess>();
  /** Which process holds each request (for its cancel). */
  private readonly requestOwner = new Map<string, PluginProcess>();
  /** Service calls passed on to the core: the asking process and its own id for the call. */
  private readonly calls = new Map<string, { process: PluginProcess; sid: string }>();
  /** Each running plugin's network relay, closed when it stops or starts again. */
  private readonly relays = new Map<string, EgressRelay>();
  private plugins: DiscoveredPlugin[] = [];
  /** The settings revision each plugin runs on (or failed on), as the core last said. */
  private readonly running = new Map<string, string>();
  private bounds = DEFAULT_BOUNDS;
  /** Configurations are applied one after another, in the order the core sent them. */
  private applying: Promise<void> = Promise.resolve();
  private ids: PluginIds | null = null;
  /** What vouches for a plugin process's request lane to the core (the core's request-lanes.ts); null: no lanes. */
  private laneToken: string | null = null;
  private readonly panels: PublicPanels;
  /** hello, then each plugin's latest init result: said again to a core that restarted. */
  private hello: HostToCore | null = null;
  private readonly inits = new Map<string, HostToCore>();
  private stopping: Promise<void> | null = null;
  private loops: Promise<void>[] = [];
  private readonly presence: CorePresence;
  onStopped: () => void = () => undefined;
  onCoreLost: () => void = () => undefined;

  constructor(private readonly options: HostOptions) {
    this.panels = new PublicPanels(options.runDir, log);
    this.presence = new CorePresence(join(options.runDir, SOCKETS.pluginHostHealth), options.coreLostAfterMs ?? CORE_LOST_AFTER_MS, () => this.coreLost());
  }

  private get dataRoot(): string {
    return pluginDataRoot(this.options.dataDir);
  }

  /** The core stayed away too long: keep what waits for it on disk, then let the process end. */
  private coreLost(): void {
    const saved = this.bus.saveUnconfirmed(join(this.dataRoot, HELD_EVENTS_FILE));
    log.error({ after_ms: this.options.coreLostAfterMs ?? CORE_LOST_AFTER_MS, held_events_saved: saved }, 'the core is gone: giving up');
    this.onCoreLost();
  }

  async start(): Promise<void> {
    const { runDir } = this.options;
    // Watching first: a socket monitor misses what happened before it existed (such as
    // the first handshake with a core that is already there).
    this.presence.unlinked();
    this.loops.push(this.receiveCore(), this.sub.receive((plugin, envelope) => this.processes.get(plugin)?.event(envelope)), this.watchCore());
    this.dealer.connect(`ipc://${join(runDir, SOCKETS.pluginHost)}`);
    this.sub.connect(`ipc://${join(runDir, SOCKETS.busOut)}`);
    this.bus.connect(`ipc://${join(runDir, SOCKETS.busIn)}`);
    mkdirSync(this.dataRoot, { recursive: true });
    const restored = this.bus.restoreUnconfirmed(join(this.dataRoot, HELD_EVENTS_FILE));
    if (restored > 0) log.info({ events: restored }, 'events an earlier plugin host held for the core: published first');

    this.plugins = discoverPlugins(this.options.pluginsDir, APP_VERSION, INTRINSIC_NAMES).plugins;
    // Nothing runs before the core says on what: a core in safe mode (carapace.json broken) says nothing.
    this.hello = { t: 'hello', pid: process.pid, version: HOST_LINK_VERSION };
    log.info({ plugins: this.plugins.length }, 'waiting for the core to hand over each plugin\'s settings (while carapace.json is broken, no plugin runs until it is fixed)');
    await this.sayHello();
  }

  /**
   * The core's configuration: secrets first (so the core can scrub them from anything a
   * plugin says), then each plugin kept, started (again) or registered as not running.
   */
  private async configure(message: Extract<CoreToHost, { t: 'configuration' }>): Promise<void> {
    if (this.stopping) return;
    const { configuration } = message;
    this.laneToken = message.lane_token ?? null;
    this.bounds = { handler_timeout_ms: configuration.handler_timeout_ms, shutdown_timeout_ms: configuration.shutdown_timeout_ms };
    const plan = planConfiguration(this.plugins, configuration, this.running, new Set(message.applied_live ?? []), this.options.env ?? process.env, this.options.handlersDir);
    await this.send({ t: 'secrets', secrets: plan.secrets }).catch(() => undefined);
    const changed = plan.steps.filter((step) => step.action !== 'keep');
    if (changed.length > 0) log.info({ changed: changed.map((step) => `${step.plugin.name}: ${step.action}`) }, 'configuration from the core');
    if (!this.ids) {
      // The host's own stored file (the plugins' uids): a migration of it is said in Activity.
      onMigration((m) => void this.send({ t: 'service', sid: randomUUID(), plugin: 'plugin-host', rid: null, group: null, method: 'reportMigration', args: { ...m } }).catch(() => undefined));
      this.ids = new PluginIds(this.dataRoot);
    }
    const ids = this.ids;
    await Promise.all(changed.map((step) => this.apply(step, ids)));
  }

  private async apply(step: PluginStep, ids: PluginIds): Promise<void> {
    const name = step.plugin.name;
    if (step.action === 'keep') return;
    if (step.action === 'update') {
      // The plugin took the change itself (a chat pairing added): its next start uses the new settings.
      this.running.set(name, step.revision);
      this.processes.get(name)?.useConfig(step.config);
      const init = this.inits.get(name);
      if (init?.t === 'init' && init.ok) await this.registered({ ...init, revision: step.revision });
      return;
    }
    await this.retire(name);
    if (this.stopping) return;
    this.running.set(name, step.revision);
    if (step.action === 'fail') {
      if (step.category !== 'NOT_CONFIGURED') log.error({ plugin: name, category: step.category, detail: step.detail }, 'not started');
      await this.registered({ t: 'init', plugin: name, ok: false, category: step.category, detail: step.detail, revision: step.revision });
      return;
    }
    await this.launch(step.plugin, realpathSync(step.handlerFile), step.config, ids);
  }

  /** Ends a plugin's process to start it again on new settings: its requests first (bounded), then its shutdown(). */
  private async retire(name: string): Promise<void> {
    const child = this.processes.get(name);
    this.inits.delete(name);
    if (!child) return;
    const deadline = Date.now() + this.bounds.handler_timeout_ms;
    while (child.busy > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const outcome = await child.stop(this.bounds.shutdown_timeout_ms);
    log.info({ plugin: name, outcome: outcome?.outcome ?? 'not running' }, 'stopped to start again on its new settings');
    if (this.processes.get(name) === child) this.processes.delete(name);
    this.sub.unsubscribe(child.subscriptions);
    this.relays.get(name)?.close();
    this.relays.delete(name);
  }

  private async launch(plugin: DiscoveredPlugin, handlerFile: string, config: JsonObject, ids: PluginIds): Promise<void> {
    // Read when it is said: an `update` may have moved the plugin to newer settings meanwhile.
    const revision = (): string => this.running.get(plugin.name) ?? '';
    const name = plugin.name;
    const dataDir = join(this.dataRoot, name);
    const pluginIds = ids.idsFor(name);
    try {
      prepareDataDir(this.dataRoot, dataDir, pluginIds);
    } catch (err) {
      await this.registered({ t: 'init', plugin: name, ok: false, category: 'CONFIG_ERROR', detail: `its data folder ${dataDir} could not be prepared: ${String((err as Error)?.message ?? err)}`, revision: revision() });
      return;
    }
    // A plugin that names no host gets no way out at all (and its process does not load a proxy client).
    const allow = AllowList.from(plugin.manifest.network, config);
    const relay =
      allow.hosts.length === 0
        ? null
        : await EgressRelay.open({
            plugin: name,
            allow,
            via: this.options.egressSocket ?? null,
            log,
            refused: (target, reason) => log.warn({ plugin: name, target, reason }, 'egress refused'),
          });
    if (relay) this.relays.set(name, relay);
    const hasPanel = plugin.manifest.panel !== undefined;
    const child: PluginProcess = new PluginProcess({
      start: { plugin: name, handlerFile, config, dataDir, initTimeoutMs: this.bounds.handler_timeout_ms, panelSocket: hasPanel ? join(dataDir, PRIVATE_PANEL) : null, egressProxy: relay?.url ?? null },
      ids: pluginIds,
      env: pluginEnv(this.options.env ?? process.env, dataDir),
      inProcess: this.options.inProcessPlugins === true,
      lane: () => (this.laneToken ? { path: join(this.options.runDir, SOCKETS.lanes), token: this.laneToken } : null),
      events: {
        init: (result) => {
          if (result.ok && hasPanel && !this.stopping) void this.panels.open(name, join(dataDir, PRIVATE_PANEL));
          if (!result.ok) log.error({ plugin: name, category: result.category, detail: result.detail }, 'initialize failed');
          void this.registered(result.ok ? { t: 'init', plugin: name, ok: true, revision: revision() } : { t: 'init', plugin: name, ok: false, category: result.category, detail: result.detail, revision: revision() });
        },
        down: (detail, restartInMs) => {
          log.error({ plugin: name, detail, restart_in_ms: restartInMs }, 'plugin process ended');
          this.inits.delete(name);
          if (restartInMs === null) this.inits.set(name, { t: 'init', plugin: name, ok: false, category: 'INTERNAL_ERROR', detail, revision: revision() });
          void this.send({ t: 'plugin_down', plugin: name, detail, restarting: restartInMs !== null }).catch(() => undefined);
        },
        response: (rid, outcome) => {
          this.requestOwner.delete(rid);
          void this.send({ t: 'response', rid, outcome }).catch(() => undefined);
        },
        hookResult: (message) => void this.send(message).catch(() => undefined),
        // Audited as a fault of the plugin's (a CRITICAL entry); its plugin_down says the same.
        fault: (detail) => {
          log.warn({ plugin: name, detail }, 'plugin at fault');
          void this.send({ t: 'service', sid: randomUUID(), plugin: name, rid: null, group: null, method: 'reportFault', args: { message: detail } }).catch(() => undefined);
        },
        service: (message) => {
          const sid = randomUUID();
          this.calls.set(sid, { process: child, sid: message.sid });
          void this.send({ t: 'service', sid, plugin: name, rid: message.rid, group: message.group, method: message.method, args: message.args }).catch(() => {
            this.calls.delete(sid);
            child.answer({ t: 'service_result', sid: message.sid, ok: false, message: 'send failed' });
          });
        },
        // Answered once the core has it: only then may the plugin save its progress past it.
        publish: (message, answer) => {
          const id = randomUUID();
          const body = Buffer.from(JSON.stringify({ plugin: name, group: message.group, payload: message.payload, key: message.key, version: PROTOCOL_VERSION, id } satisfies PublishedEvent));
          if (body.length > MAX_EVENT_BYTES) return answer(`the event is ${body.length} bytes; at most ${MAX_EVENT_BYTES} are published`);
          this.bus.publish(name, id, [Buffer.from(message.topic), body], (held) => answer(undefined, held));
        },
      },
    });
    this.processes.set(name, child);
    child.subscriptions = plugin.manifest.subscribes.map((prefix) => `${name} ${prefix}`);
    this.sub.subscribe(child.subscriptions);
    // What an earlier host's run of it left (a host killed with -9 ends no grandchild).
    if (!this.options.inProcessPlugins) await endEverythingOf(pluginIds, undefined);
    child.start();
  }

  /** Sends a plugin's init result and keeps it for the next core. */
  private registered(message: Extract<HostToCore, { t: 'init' }>): Promise<void> {
    this.inits.set(message.plugin, message);
    return this.send(message).catch(() => undefined);
  }

  /** Says hello and each plugin's init result again, to a (new) core. */
  private register(): void {
    if (!this.hello) return;
    void this.sayHello().catch(() => undefined);
    for (const message of this.inits.values()) void this.send(message).catch(() => undefined);
  }

  /**
   * The hello goes alone, one JSON object in its frame, never in a batch: a core of
   * another link version (one before 3 reads no batch) must read it to refuse this host
   * clearly (UNSUPPORTED_VERSION). The batch of this turn follows it on the same queue.
   */
  private sayHello(): Promise<void> {
    return this.dealerQueue.push([JSON.stringify(this.hello)]);
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
        if (++connections > 1) {
          log.info({ connection: connections }, 'core connected again: registering');
          this.register();
        }
      }
    } catch {
      // the socket closed
    }
  }

  private onRequest(message: Extract<CoreToHost, { t: 'request' }>): void {
    const child = this.processes.get(message.plugin);
    if (!this.stopping && child?.request(message.rid, message.envelope)) this.requestOwner.set(message.rid, child);
    else void this.send({ t: 'response', rid: message.rid, outcome: { kind: 'unavailable' } }).catch(() => undefined);
  }

  private onHook(message: Extract<CoreToHost, { t: 'hook' }>): void {
    const { plugin, ...hook } = message;
    const child = this.processes.get(plugin);
    if (hook.hook === 'connection_check') {
      void connectionCheck(hook.hid, this.stopping ? undefined : child, (task) => this.queued(task)).then((result) => result && this.send(result).catch(() => undefined));
      return;
    }
    if (!child?.hook(hook)) void this.send({ t: 'hook_result', hid: message.hid, ok: false, detail: 'plugin not running' }).catch(() => undefined);
  }

  /** Runs `task` in the queue of configurations (after those sent before it, before those sent after). */
  private queued<T>(task: () => Promise<T>): Promise<T> {
    const run = this.applying.then(task);
    this.applying = run.then(() => undefined, () => undefined);
    return run;
  }

  private onServiceResult(message: Extract<CoreToHost, { t: 'service_result' }>): void {
    const call = this.calls.get(message.sid);
    if (!call) return;
    this.calls.delete(message.sid);
    call.process.answer({ ...message, sid: call.sid });
  }

  private async receiveCore(): Promise<void> {
    try {
      // The core batches (boundary/frame-batch.ts).
      for await (const frames of this.dealer) {
        for (const message of parseFrames<CoreToHost>(frames)) {
          if (message.t === 'request') this.onRequest(message);
          else if (message.t === 'hook') this.onHook(message);
          else if (message.t === 'service_result') this.onServiceResult(message);
          else if (message.t === 'shutdown') void this.sub.drained().then(() => this.stop(message.drain_ms, message.shutdown_ms));
          else if (message.t === 'register') this.register();
          else if (message.t === 'configuration') this.applying = this.applying.then(() => this.configure(message)).catch((err: unknown) => log.error({ err }, 'could not apply the core\'s configuration'));
          else if (message.t === 'received') this.bus.received(message.id, typeof message.held === 'string' ? message.held.slice(0, 500) : undefined);
          else if (message.t === 'cancel') this.requestOwner.get(message.rid)?.cancel(message.rid);
          else if (message.t === 'refused') log.fatal({ code: message.code, speaks: message.speaks }, `the core refused this plugin host: ${message.message}`);
        }
      }
    } catch (err) {
      if (!this.dealer.closed) throw err;
    }
  }

  private send(message: HostToCore): Promise<void> {
    return this.toCore.push(JSON.stringify(message));
  }

  /** Drain in-flight requests, then every plugin's shutdown() in parallel, bounded; then their processes end. */
  stop(drainMs = this.bounds.handler_timeout_ms, shutdownMs = this.bounds.shutdown_timeout_ms): Promise<void> {
    this.stopping ??= (async () => {
      const deadline = Date.now() + drainMs;
      const busy = (): boolean => [...this.processes.values()].some((p) => p.busy > 0);
      while (busy() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const results = await Promise.all(
        [...this.processes.values()].map(async (child) => {
          const outcome = await child.stop(shutdownMs);
          return outcome ? { plugin: child.name, ...outcome } : null;
        }),
      );
      await this.send({ t: 'stopped', results: results.filter((r) => r !== null) }).catch(() => undefined);
      this.presence.close();
      this.panels.close();
      for (const relay of this.relays.values()) relay.close();
      // Give the report a moment to leave before the sockets close.
      await new Promise((r) => setTimeout(r, 50));
      this.dealer.close();
      this.sub.close();
      // Stopped while the core is away (a stopping core shut this host down, and Compose's
      // restart policy started a fresh one that is stopped in turn): what it holds is kept.
      const saved = this.bus.saveUnconfirmed(join(this.dataRoot, HELD_EVENTS_FILE));
      if (saved > 0) log.warn({ held_events_saved: saved }, 'stopped with events the core has not confirmed: kept for the next plugin host');
      await this.bus.close();
      await Promise.all(this.loops.map((l) => l.catch(() => undefined)));
      this.onStopped();
    })();
    return this.stopping;
  }
}
