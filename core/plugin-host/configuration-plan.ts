// What the plugin host does with a configuration from the core: for each discovered
// plugin, keep it running (its settings did not change), start it (again) on new
// settings, only take the new settings for its next start (the plugin applied the change
// itself: `applied_live`), or register why it cannot run. `${VAR}` references are filled
// here, from the host's own environment: the core never holds a plugin secret it was not
// told to scrub.
import type { DiscoveredPlugin } from '../src/plugins/discovery.js';
import type { HostConfiguration } from '../src/plugins/host-protocol.js';
import { settingsOf } from '../src/plugins/plugin-settings.js';
import type { JsonObject } from '../src/protocol/envelope.js';
import type { InitFailureCategory } from '../src/protocol/errors.js';
import { handlerPath } from './load-handler.js';
import { resolvePluginConfig } from './plugin-config.js';

export type PluginStep =
  | { action: 'keep'; plugin: DiscoveredPlugin; revision: string }
  | { action: 'update'; plugin: DiscoveredPlugin; revision: string; config: JsonObject }
  | { action: 'start'; plugin: DiscoveredPlugin; revision: string; config: JsonObject; handlerFile: string }
  | { action: 'fail'; plugin: DiscoveredPlugin; revision: string; category: InitFailureCategory; detail: string };

export interface ConfigurationPlan {
  /** Every value filled in from the environment, for the core's scrubber (a restarted core needs them all again). */
  secrets: string[];
  steps: PluginStep[];
}

export function planConfiguration(
  plugins: DiscoveredPlugin[],
  configuration: HostConfiguration,
  running: ReadonlyMap<string, string>,
  appliedLive: ReadonlySet<string>,
  env: NodeJS.ProcessEnv,
  handlersDir: string,
): ConfigurationPlan {
  const secrets: string[] = [];
  const steps = plugins.map((plugin): PluginStep => {
    // A plugin the core did not name (it should name every one it discovered) runs on no settings.
    const given = Object.hasOwn(configuration.plugins, plugin.name) ? configuration.plugins[plugin.name] : settingsOf({}, plugin.name);
    const revision = given.revision;
    const resolved = resolvePluginConfig(given.settings, plugin.manifest.config_schema, env);
    if (resolved.ok) secrets.push(...resolved.secrets);
    if (running.get(plugin.name) === revision) return { action: 'keep', plugin, revision };
    if (!resolved.ok) return { action: 'fail', plugin, revision, category: resolved.notConfigured ? 'NOT_CONFIGURED' : 'CONFIG_ERROR', detail: resolved.reason };
    if (appliedLive.has(plugin.name) && running.has(plugin.name)) return { action: 'update', plugin, revision, config: resolved.config };
    const handlerFile = handlerPath(plugin.name, plugin.dir, handlersDir);
    if (!handlerFile) return { action: 'fail', plugin, revision, category: 'CONFIG_ERROR', detail: 'no handler.js found (was the project built?)' };
    return { action: 'start', plugin, revision, config: resolved.config, handlerFile };
  });
  return { secrets, steps };
}
