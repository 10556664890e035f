// Each plugin's settings as the core hands them to the plugin host (DESIGN 18: the core
// alone reads carapace.json). A section goes as written, `${VAR}` references and all:
// the host fills them from its own environment, so that no plugin secret reaches the core
// except as a value to scrub (the host's `secrets` message, as before).
import { createHash } from 'node:crypto';
import type { CoreConfig } from '../config.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { HostConfiguration, PluginSettings } from './host-protocol.js';

/** A plugin's own section, or none: a folder named like an Object.prototype member ("constructor") must not get that member. */
export function pluginSection(plugins: Record<string, JsonObject>, name: string): JsonObject {
  return Object.hasOwn(plugins, name) ? plugins[name] : {};
}

/** Stable JSON (keys sorted): two equal sections have one revision, however the file orders them. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function settingsOf(plugins: Record<string, JsonObject>, name: string): PluginSettings {
  const settings = pluginSection(plugins, name);
  return { settings, revision: createHash('sha256').update(canonicalJson(settings)).digest('hex').slice(0, 16) };
}

/** What the host runs on: every discovered plugin's section (empty when the file has none), and the host's bounds. */
export function hostConfiguration(config: CoreConfig, plugins: string[]): HostConfiguration {
  return {
    plugins: Object.fromEntries(plugins.map((name) => [name, settingsOf(config.plugins, name)])),
    handler_timeout_ms: config.handler_timeout_ms,
    shutdown_timeout_ms: config.shutdown_timeout_ms,
  };
}
