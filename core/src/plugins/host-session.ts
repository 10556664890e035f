// The core's view of the linked plugin host: what it is told to run on (each plugin's
// settings, the answer to its hello and sent again when carapace.json changes), and what
// it says about each plugin (init, its process ending, the host going away), kept in the
// catalog's plugin states and the audit log. An init for settings the core no longer runs
// is stale: the host is starting that plugin again on the current ones.
import pino from 'pino';
import type { AuditLog } from '../audit/audit-log.js';
import type { CoreConfig } from '../config.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ToolCatalog } from './catalog.js';
import { HOST_LINK_VERSION, type HostToCore } from './host-protocol.js';
import type { PluginHostLink } from './host-link.js';
import { hostConfiguration, settingsOf } from './plugin-settings.js';

const log = pino({ base: { service: 'core' } });

export interface HostSessionDeps {
  hostLink: PluginHostLink;
  catalog: ToolCatalog;
  audit: AuditLog;
  /** The running configuration (replaced in parts when carapace.json changes). */
  config: CoreConfig;
  /** Values to scrub from now on (what the host filled into settings from its environment). */
  addSecrets(secrets: string[]): void;
  scrub(text: string): string;
  publish(topic: string, group: string | null, payload: JsonObject): void;
  /** No plugin is starting any more. */
  settled(): void;
  /** A plugin runs (again): what waits for it may go. */
  ready(plugin: string): void;
}

export class HostSession {
  constructor(private readonly deps: HostSessionDeps) {
    const { hostLink } = deps;
    hostLink.on('hello', (m) => this.onHello(m));
    hostLink.on('secrets', (m) => deps.addSecrets(m.secrets.filter((s): s is string => typeof s === 'string')));
    hostLink.on('init', (m) => this.onInit(m));
    hostLink.on('pluginDown', (m) => this.onDown(m));
    hostLink.on('down', () => this.onHostDown());
    hostLink.on('refused', (m) => deps.audit.record({ group: null, session: null, source: 'plugin-host', topic: null, correlation: null, stage: 'plugin', outcome: 'rejected', code: 'UNSUPPORTED_VERSION', reason: `a plugin host (pid ${String(m.pid).slice(0, 16)}) speaking protocol version ${JSON.stringify(m.version ?? null).slice(0, 16)} was refused (this core speaks ${HOST_LINK_VERSION})` }));
    // Its requests go through the host again: nothing is lost, but a person must see it.
    hostLink.on('laneFault', (f) => deps.audit.record({ group: null, session: null, source: f.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'error', severity: 'CRITICAL', code: 'LANE_CLOSED', reason: `plugin "${f.plugin}" sent ${f.detail}: its lane closed, its requests go through the plugin host` }));
    // Whether a handler aborted at its deadline stopped, and how: the caller was answered RESULT_UNKNOWN meanwhile.
    hostLink.on('late', (l) => deps.audit.record({ group: l.group, session: l.session, source: l.plugin, topic: l.topic, correlation: l.correlation, stage: 'handler', outcome: l.outcome === 'stopped' ? 'ok' : 'error', reason: l.outcome === 'stopped' ? 'after its deadline the handler stopped before acting' : `after its deadline the handler ran on and ended with ${l.outcome}` }));
  }

  /** No plugin is waiting for its init answer. */
  settled(): boolean {
    const { catalog } = this.deps;
    return !catalog.pluginNames().some((name) => catalog.state(name) === 'starting');
  }

  /**
   * carapace.json changed: the host runs on the new settings; `restarting` plugins are
   * started again (unavailable until their init), `appliedLive` ones took the change themselves.
   */
  reconfigure(restarting: string[], appliedLive: string[] = []): void {
    const { catalog, hostLink } = this.deps;
    if (!hostLink.configure(this.configuration(), appliedLive)) return; // no host: it gets these on its hello
    for (const name of restarting) if (catalog.state(name) !== undefined) catalog.setState(name, 'starting', undefined, 'its settings in carapace.json changed: starting it again');
  }

  private configuration(): ReturnType<typeof hostConfiguration> {
    const { catalog, config } = this.deps;
    return hostConfiguration(config, catalog.pluginNames().filter((name) => catalog.discovered(name) !== null));
  }

  private onHello(message: Extract<HostToCore, { t: 'hello' }>): void {
    const { catalog, audit, hostLink } = this.deps;
    for (const name of catalog.pluginNames()) if (catalog.state(name) !== 'failed') catalog.setState(name, 'starting');
    hostLink.configure(this.configuration());
    audit.record({ group: null, session: null, source: 'plugin-host', topic: null, correlation: null, stage: 'plugin', outcome: 'ok', reason: `plugin host connected (pid ${message.pid})` });
  }

  private onInit(message: Extract<HostToCore, { t: 'init' }>): void {
    const { catalog, audit, config } = this.deps;
    if (catalog.state(message.plugin) === undefined) return;
    if (message.revision !== settingsOf(config.plugins, message.plugin).revision) {
      log.info({ plugin: message.plugin, revision: message.revision }, 'an init for settings no longer in force: the host starts it again on the current ones');
      return;
    }
    // Running already and moved to settings it took itself (a paired chat): nothing new to say.
    if (message.ok && catalog.state(message.plugin) === 'healthy') return;
    if (message.ok) {
      catalog.setState(message.plugin, 'healthy');
      this.deps.ready(message.plugin);
      audit.record({ group: null, session: null, source: message.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'ok', reason: 'initialized' });
      this.deps.publish('plugin.ready', null, { plugin: message.plugin });
    } else {
      catalog.setState(message.plugin, 'failed', message.category, this.deps.scrub(message.detail));
      this.auditFailure(message.plugin, message.category, message.detail);
    }
    if (this.settled()) this.deps.settled();
  }

  /** A plugin's process ended: its tools are unavailable until it is back (or for good). */
  private onDown(message: Extract<HostToCore, { t: 'plugin_down' }>): void {
    const { catalog, audit, scrub } = this.deps;
    if (catalog.state(message.plugin) === undefined) return;
    if (message.restarting) {
      catalog.setState(message.plugin, 'starting', undefined, `its process ended (${scrub(message.detail)}); starting it again`);
      audit.record({ group: null, session: null, source: message.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'error', reason: `the process of plugin "${message.plugin}" ended (${message.detail}); its tools are unavailable until it is started again`, detail: message.detail });
    } else {
      catalog.setState(message.plugin, 'failed', 'INTERNAL_ERROR', scrub(message.detail));
      this.auditFailure(message.plugin, 'INTERNAL_ERROR', message.detail);
    }
  }

  auditFailure(plugin: string, category: string, detail: string): void {
    const { audit } = this.deps;
    if (category === 'NOT_CONFIGURED') {
      audit.record({ group: null, session: null, source: plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'ok', code: category, reason: `plugin "${plugin}" is not configured: off`, detail });
      return;
    }
    audit.record({ group: null, session: null, source: plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'error', severity: 'CRITICAL', code: category, reason: `plugin "${plugin}" failed to initialize (${category})`, detail });
  }

  private onHostDown(): void {
    const { catalog, audit } = this.deps;
    for (const name of catalog.pluginNames()) if (catalog.state(name) === 'healthy') catalog.setState(name, 'starting');
    audit.record({ group: null, session: null, source: 'plugin-host', topic: null, correlation: null, stage: 'plugin', outcome: 'error', reason: 'plugin host disconnected; its tools are unavailable until it returns' });
  }
}
