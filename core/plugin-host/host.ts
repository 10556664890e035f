// The plugin host: supervises one process per plugin (plugin-process.ts), so a plugin
// that crashes, hangs or is hostile reaches neither the core nor another plugin. It holds
// the one link to the core (the private plugin socket and the event bus) and says which
// plugin each message is from; the core has already validated everything it sends.
import { randomUUID } from 'node:crypto';
import { chownSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname, join } from 'node:path';
import * as zmq from 'zeromq';
import pino from 'pino';
import { FrameBatch, parseFrames } from '../src/boundary/frame-batch.js';
import { SendQueue } from '../src/boundary/send-queue.js';
import type { CoreConfig } from '../src/config.js';
import { INTRINSIC_NAMES } from '../src/intrinsics/intrinsics.js';
import { discoverPlugins, type DiscoveredPlugin } from '../src/plugins/discovery.js';
import { BUS_DRAINED, MAX_EVENT_BYTES, SOCKETS, type CoreToHost, type HostToCore, type PublishedEvent } from '../src/plugins/host-protocol.js';
import { PROTOCOL_VERSION, type EventEnvelope, type JsonObject } from '../src/protocol/envelope.js';
import { APP_VERSION } from '../src/version.js';
import { handlerPath } from './load-handler.js';
import { panelSocket, relayTo, servePanel } from './panel-server.js';
import { BusPublisher } from './bus-publisher.js';
import { CorePresence } from './core-presence.js';
import { EgressRelay } from './egress-relay.js';
import { endEverythingOf, PluginIds, pluginEnv, prepareDataDir } from './isolation.js';
import { AllowList } from './network-allow-list.js';
import { PluginProcess } from './plugin-process.js';
import { pluginSection, resolvePluginConfig } from './plugin-config.js';

export interface HostOptions {
  runDir: string;
  pluginsDir: string;
  handlersDir: string;
  dataDir: string;
  config: CoreConfig;
  env?: NodeJS.ProcessEnv;
  /** A core away (or never there) for longer than this: the host gives up and onCoreLost runs. */
  coreLostAfterMs?: number;
  /** The egress service's socket (the appliance); unset, plugins' tunnels connect from here. */
  egressSocket?: string | null;
  /** The benchmark's baseline only (bench/single-host.ts): every plugin inside this process, unisolated. */
  inProcessPlugins?: boolean;
}

/** How long a shutdown from the core waits for the core's last events (BUS_DRAINED). */
const BUS_DRAINED_WAIT_MS = 2000;
/** The default bound on a core's absence: far longer than a restart takes. */
const CORE_LOST_AFTER_MS = 120_000;
/** Plugin events the core has not confirmed, kept here when the host stops or gives up waiting. */
const HELD_EVENTS_FILE = '.held-events.json';
/** Each plugin's panel, served by its process in its own folder (relayed: panel-server.ts). */
const PRIVATE_PANEL = '.panel.sock';

const log = pino({ base: { service: 'plugin-host' } }, pino.destination(2));

/** Where plugins keep their data: `<data>/plugins/<name>/`, nothing else of the data folder. */
export function pluginDataRoot(dataDir: string): string {
  return join(dataDir, 'plugins');
}

export class PluginHost {
  private readonly dealer = new zmq.Dealer({ linger: 0, heartbeatInterval: 1000, heartbeatTimeout: 5000, reconnectInterval: 100 });
  private readonly sub = new zmq.Subscriber({ linger: 0 });
  private drainedSeen!: () => void;
  private readonly drainedMarker = new Promise<void>((resolve) => (this.drainedSeen = resolve));
  private readonly bus = new BusPublisher((plugin) => log.warn({ plugin }, 'too many events the core has not confirmed: the oldest is given up'));
  private readonly dealerQueue = new SendQueue((frames) => this.dealer.send(frames));
  private readonly toCore = new FrameBatch((frames) => this.dealerQueue.push(frames));
  private readonly processes = new Map<string, PluginProcess>();
  /** Which process holds each request (for its cancel). */
  private readonly requestOwner = new Map<string, PluginProcess>();
  /** Service calls passed on to the core: the asking process and its own id for the call. */
  private readonly calls = new Map<string, { process: PluginProcess; sid: string }>();
  private readonly relays: EgressRelay[] = [];
  /** Plugin panels' HTTP servers (panel-server.ts), closed at stop. */
  private readonly panels = new Map<string, Server>();
  /** hello, then each plugin's latest init result: said again to a core that restarted. */
  private hello: HostToCore | null = null;
  private readonly inits = new Map<string, HostToCore>();
  private stopping: Promise<void> | null = null;
  private loops: Promise<void>[] = [];
  private readonly presence: CorePresence;
  private linkedOnce!: () => void;
  private readonly firstLink = new Promise<void>((resolve) => (this.linkedOnce = resolve));
  onStopped: () => void = () => undefined;
  onCoreLost: () => void = () => undefined;

  constructor(private readonly options: HostOptions) {
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
    this.loops.push(this.receiveCore(), this.receiveEvents(), this.watchCore());
    this.dealer.connect(`ipc://${join(runDir, SOCKETS.pluginHost)}`);
    this.sub.connect(`ipc://${join(runDir, SOCKETS.busOut)}`);
    this.sub.subscribe(BUS_DRAINED);
    this.bus.connect(`ipc://${join(runDir, SOCKETS.busIn)}`);
    mkdirSync(this.dataRoot, { recursive: true });
    const restored = this.bus.restoreUnconfirmed(join(this.dataRoot, HELD_EVENTS_FILE));
    if (restored > 0) log.info({ events: restored }, 'events an earlier plugin host held for the core: published first');

    const { plugins } = discoverPlugins(this.options.pluginsDir, APP_VERSION, INTRINSIC_NAMES);
    const env = this.options.env ?? process.env;
    const secrets: string[] = [];
    const failures: Extract<HostToCore, { t: 'init' }>[] = [];
    const runnable: { plugin: DiscoveredPlugin; handlerFile: string; config: JsonObject }[] = [];
    for (const plugin of plugins) {
      const resolved = resolvePluginConfig(pluginSection(this.options.config.plugins, plugin.name), plugin.manifest.config_schema, env);
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
      runnable.push({ plugin, handlerFile: realpathSync(file), config: resolved.config });
    }
    // Secrets first, so the core can scrub them from anything a handler says later.
    this.hello = { t: 'hello', pid: process.pid, secrets, version: PROTOCOL_VERSION };
    await this.send(this.hello);
    for (const failure of failures) await this.registered(failure);
    // Plugins start once a core is there: it moves an older layout's plugin data first
    // (core-entrypoint.sh), and nothing they publish could be handled before.
    await this.firstLink;
    if (this.stopping) return;
    const ids = new PluginIds(this.dataRoot);
    await Promise.all(runnable.map((entry) => this.launch(entry.plugin, entry.handlerFile, entry.config, ids)));
  }

  private async launch(plugin: DiscoveredPlugin, handlerFile: string, config: JsonObject, ids: PluginIds): Promise<void> {
    const name = plugin.name;
    const dataDir = join(this.dataRoot, name);
    const pluginIds = ids.idsFor(name);
    try {
      prepareDataDir(this.dataRoot, dataDir, pluginIds);
    } catch (err) {
      await this.registered({ t: 'init', plugin: name, ok: false, category: 'CONFIG_ERROR', detail: `its data folder ${dataDir} could not be prepared: ${String((err as Error)?.message ?? err)}` });
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
    if (relay) this.relays.push(relay);
    const hasPanel = plugin.manifest.panel !== undefined;
    const child: PluginProcess = new PluginProcess({
      start: { plugin: name, handlerFile, config, dataDir, initTimeoutMs: this.options.config.handler_timeout_ms, panelSocket: hasPanel ? join(dataDir, PRIVATE_PANEL) : null, egressProxy: relay?.url ?? null },
      ids: pluginIds,
      env: pluginEnv(this.options.env ?? process.env, dataDir),
      inProcess: this.options.inProcessPlugins === true,
      events: {
        init: (result) => {
          if (result.ok && hasPanel) void this.publicPanel(name, join(dataDir, PRIVATE_PANEL));
          if (!result.ok) log.error({ plugin: name, category: result.category, detail: result.detail }, 'initialize failed');
          void this.registered(result.ok ? { t: 'init', plugin: name, ok: true } : { t: 'init', plugin: name, ok: false, category: result.category, detail: result.detail });
        },
        down: (detail, restartInMs) => {
          log.error({ plugin: name, detail, restart_in_ms: restartInMs }, 'plugin process ended');
          this.inits.delete(name);
          if (restartInMs === null) this.inits.set(name, { t: 'init', plugin: name, ok: false, category: 'INTERNAL_ERROR', detail });
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
          this.bus.publish(name, id, [Buffer.from(message.topic), body], answer);
        },
      },
    });
    this.processes.set(name, child);
    for (const prefix of plugin.manifest.subscribes) this.sub.subscribe(`${name} ${prefix}`);
    // What an earlier host's run of it left (a host killed with -9 ends no grandchild).
    if (!this.options.inProcessPlugins) await endEverythingOf(pluginIds, undefined);
    child.start();
  }

  /** The console's socket for a plugin's panel, relaying to the plugin's own (made once). */
  private async publicPanel(name: string, privateSocket: string): Promise<void> {
    if (this.panels.has(name) || this.stopping) return;
    try {
      const socket = panelSocket(this.options.runDir, name);
      this.panels.set(name, await servePanel(socket, name, relayTo(privateSocket)));
      // The console connects as the core's user, who owns the run folder; a root host hands it over.
      if (PluginIds.isolating()) {
        const { uid, gid } = statSync(this.options.runDir);
        for (const path of [dirname(socket), socket]) chownSync(path, uid, gid);
      }
    } catch (err) {
      log.error({ plugin: name, err }, 'panel socket could not be made');
    }
  }

  /** Sends a plugin's init result and keeps it for the next core. */
  private registered(message: Extract<HostToCore, { t: 'init' }>): Promise<void> {
    this.inits.set(message.plugin, message);
    return this.send(message).catch(() => undefined);
  }

  /** Says hello and each plugin's init result again, to a (new) core. */
  private register(): void {
    if (!this.hello) return;
    for (const message of [this.hello, ...this.inits.values()]) void this.send(message).catch(() => undefined);
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
        this.linkedOnce();
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
    if (!child?.hook(hook)) void this.send({ t: 'hook_result', hid: message.hid, ok: false, detail: 'plugin not running' }).catch(() => undefined);
  }

  private onServiceResult(message: Extract<CoreToHost, { t: 'service_result' }>): void {
    const call = this.calls.get(message.sid);
    if (!call) return;
    this.calls.delete(message.sid);
    call.process.answer({ ...message, sid: call.sid });
  }

  private async receiveCore(): Promise<void> {
    try {
      // The core batches: every frame is one message.
      for await (const frames of this.dealer) {
        for (const message of parseFrames<CoreToHost>(frames)) {
          if (message.t === 'request') this.onRequest(message);
          else if (message.t === 'hook') this.onHook(message);
          else if (message.t === 'service_result') this.onServiceResult(message);
          else if (message.t === 'shutdown') void this.busDrained().then(() => this.stop(message.drain_ms, message.shutdown_ms));
          else if (message.t === 'register') this.register();
          else if (message.t === 'received') this.bus.received(message.id);
          else if (message.t === 'cancel') this.requestOwner.get(message.rid)?.cancel(message.rid);
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
        if (address.toString('utf8') === BUS_DRAINED) {
          this.drainedSeen();
          continue;
        }
        const plugin = address.toString('utf8').split(' ', 1)[0];
        try {
          this.processes.get(plugin)?.event(JSON.parse(body.toString('utf8')) as EventEnvelope);
        } catch {
          continue;
        }
      }
    } catch (err) {
      if (!this.sub.closed) throw err;
    }
  }

  /**
   * Until the core's marker after its last events has come over the bus (bounded: an older
   * core sends none), so that a shutdown does not overtake what the core published just
   * before it (the link and the bus are two sockets, with no order between them).
   */
  private busDrained(): Promise<void> {
    return Promise.race([this.drainedMarker, new Promise<void>((r) => setTimeout(r, BUS_DRAINED_WAIT_MS).unref())]);
  }

  private send(message: HostToCore): Promise<void> {
    return this.toCore.push(Buffer.from(JSON.stringify(message)));
  }

  /** Drain in-flight requests, then every plugin's shutdown() in parallel, bounded; then their processes end. */
  stop(drainMs = this.options.config.handler_timeout_ms, shutdownMs = this.options.config.shutdown_timeout_ms): Promise<void> {
    this.stopping ??= (async () => {
      this.linkedOnce();
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
      for (const panel of this.panels.values()) panel.close();
      for (const relay of this.relays) relay.close();
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
