// The flat tool catalog (intrinsics + plugin tools) and each plugin's health.
// Tools of a plugin that failed are unknown (stage 2); tools of a plugin that is
// starting, draining or whose host is down are known but unavailable (stage 6).
import type { InitFailureCategory } from '../protocol/errors.js';
import type { DiscoveredPlugin, RejectedPlugin, ToolEntry } from './discovery.js';

export type PluginState = 'starting' | 'healthy' | 'failed' | 'draining' | 'stopped';

export interface PluginHealth {
  healthy: string[];
  failed: { name: string; category: InitFailureCategory }[];
}

export interface ToolSummary {
  name: string;
  description: string;
  risk_level: 'low' | 'high';
  arguments_schema: unknown;
}

interface PluginRecord {
  plugin: DiscoveredPlugin | null;
  state: PluginState;
  category?: InitFailureCategory;
  /** Why it failed, or why it is starting again (its process ended): for the person. */
  detail?: string;
  /** Its events the configuration does not allow, kept (bus/event-intake.ts): shown red whatever its state. */
  refusing?: string;
}

export class ToolCatalog {
  private readonly tools = new Map<string, ToolEntry>();
  private readonly plugins = new Map<string, PluginRecord>();
  /** Core tools whose service this core does not have (run_program without Docker): known, not offered. */
  private readonly coreOff = new Set<string>();

  constructor(intrinsics: ToolEntry[], discovered: DiscoveredPlugin[], rejected: RejectedPlugin[]) {
    for (const tool of intrinsics) this.tools.set(tool.name, tool);
    for (const plugin of discovered) {
      this.plugins.set(plugin.name, { plugin, state: 'starting' });
      for (const tool of plugin.tools) this.tools.set(tool.name, tool);
    }
    for (const bad of rejected) this.plugins.set(bad.name, { plugin: null, state: 'failed', category: 'CONFIG_ERROR', detail: bad.reason });
  }

  /** The tool for a name, unless its plugin failed to initialize. */
  lookup(name: string): ToolEntry | undefined {
    const tool = this.tools.get(name);
    if (!tool || tool.owner === 'core') return tool;
    return this.plugins.get(tool.owner)?.state === 'failed' ? undefined : tool;
  }

  /** Offers a core tool to agents (list_tools, skills) or stops offering it; calls of one not offered get its own error. */
  offerCoreTool(name: string, offered: boolean): void {
    if (offered) this.coreOff.delete(name);
    else this.coreOff.add(name);
  }

  state(plugin: string): PluginState | undefined {
    return this.plugins.get(plugin)?.state;
  }

  setState(plugin: string, state: PluginState, category?: InitFailureCategory, detail?: string): void {
    const record = this.plugins.get(plugin);
    if (!record) return;
    record.state = state;
    record.category = state === 'failed' ? category ?? 'INTERNAL_ERROR' : undefined;
    // Its first line (an error's message, not its stack: that is in the audit log).
    record.detail = detail?.split('\n', 1)[0].slice(0, 300);
  }

  /** Its events are held for a configuration that allows them (why, for the person), or null: none are. */
  setRefusing(plugin: string, why: string | null): void {
    const record = this.plugins.get(plugin);
    if (record) record.refusing = why?.slice(0, 500) ?? undefined;
  }

  /** Every plugin's state, with its failure's category and why, and events the configuration refused (the console, the doctor). */
  states(): { name: string; state: PluginState; category: InitFailureCategory | null; detail: string | null; refusing: string | null }[] {
    return [...this.plugins].map(([name, r]) => ({ name, state: r.state, category: r.state === 'failed' ? r.category ?? 'INTERNAL_ERROR' : null, detail: r.detail ?? null, refusing: r.refusing ?? null }));
  }

  /** Plugins with a console panel (manifest `panel`), their menu titles, and why one cannot serve now (null: it can). */
  panels(): { name: string; title: string; down: string | null }[] {
    return [...this.plugins].flatMap(([name, r]) => {
      if (!r.plugin?.manifest.panel) return [];
      const down = r.state === 'healthy' ? null : r.state === 'failed' ? `the plugin failed (${r.category ?? 'INTERNAL_ERROR'}${r.detail ? `: ${r.detail}` : ''})` : `the plugin is ${r.state}`;
      return [{ name, title: r.plugin.manifest.panel.title, down }];
    });
  }

  /** Does the plugin provide a channel (may it ask for a chat to be paired)? */
  isChannel(plugin: string): boolean {
    return (this.plugins.get(plugin)?.plugin?.manifest.provides.channels.length ?? 0) > 0;
  }

  pluginNames(): string[] {
    return [...this.plugins.keys()];
  }

  discovered(name: string): DiscoveredPlugin | null {
    return this.plugins.get(name)?.plugin ?? null;
  }

  /**
   * Plugins subscribed to a topic (prefix match, as ZeroMQ does) that are healthy, or
   * starting: the plugin host keeps what comes for one until it is ready (start-queue.ts).
   */
  subscribers(topic: string): string[] {
    const out: string[] = [];
    for (const [name, record] of this.plugins) {
      if ((record.state === 'healthy' || record.state === 'starting') && record.plugin?.manifest.subscribes.some((prefix) => topic.startsWith(prefix))) out.push(name);
    }
    return out;
  }

  /** Plugins whose manifest declares `hook` (whatever their state). */
  declaring(hook: string): string[] {
    return [...this.plugins].filter(([, record]) => record.plugin?.manifest.provides.hooks.includes(hook)).map(([name]) => name);
  }

  hookProvider(hook: string): string | null {
    for (const [name, record] of this.plugins) {
      if (record.state === 'healthy' && record.plugin?.manifest.provides.hooks.includes(hook)) return name;
    }
    return null;
  }

  health(): PluginHealth {
    const health: PluginHealth = { healthy: [], failed: [] };
    for (const [name, record] of this.plugins) {
      if (record.state === 'healthy') health.healthy.push(name);
      else if (record.state === 'failed') health.failed.push({ name, category: record.category ?? 'INTERNAL_ERROR' });
    }
    return health;
  }

  /** What an agent may call now: the intrinsics offered and the tools of healthy plugins. */
  available(): ToolSummary[] {
    return [...this.tools.values()]
      .filter((t) => (t.owner === 'core' ? !this.coreOff.has(t.name) : this.plugins.get(t.owner)?.state === 'healthy'))
      .map(({ name, description, risk_level, arguments_schema }) => ({ name, description, risk_level, arguments_schema }));
  }
}
