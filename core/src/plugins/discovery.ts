// Plugin discovery: the filesystem is the registry. Each folder under plugins/ with a
// manifest.json is a plugin named by its folder. A malformed plugin is reported and left
// out; conflicts between plugins stop start-up, naming both.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { StartupError } from '../protocol/errors.js';
import type { JsonObject } from '../protocol/envelope.js';
import { manifestSchema, PLUGIN_NAME_PATTERN, type Manifest, type RecipientRule } from './manifest.js';
import { createAjv, describeFailure, type Ajv, type ValidateFunction } from './schema-compiler.js';

export interface ToolEntry {
  name: string;
  description: string;
  risk_level: 'low' | 'high';
  task_run_risk_level?: 'low' | 'high';
  file_arguments?: string[];
  describe?: boolean;
  low_risk_recipients?: RecipientRule;
  untrusted_output?: boolean;
  arguments_schema: JsonObject;
  /** Plugin directory name, or "core" for intrinsics. */
  owner: string;
  validate: ValidateFunction;
}

export interface DiscoveredPlugin {
  name: string;
  dir: string;
  manifest: Manifest;
  tools: ToolEntry[];
}

export interface RejectedPlugin {
  name: string;
  reason: string;
}

export interface Discovery {
  plugins: DiscoveredPlugin[];
  rejected: RejectedPlugin[];
}

const defaultAjv = createAjv();
const validateManifest = defaultAjv.compile(manifestSchema);

/** Compiles a tool's schema. Each discovery passes its own ajv, so schema $ids never collide across runs. */
export function compileTool(
  decl: Pick<ToolEntry, 'name' | 'description' | 'risk_level' | 'task_run_risk_level' | 'file_arguments' | 'describe' | 'low_risk_recipients' | 'untrusted_output' | 'arguments_schema'>,
  owner: string,
  ajv: Ajv = defaultAjv,
): ToolEntry {
  return { ...decl, owner, validate: ajv.compile(decl.arguments_schema) };
}

function loadPlugin(name: string, dir: string, appVersion: string, ajv: Ajv): DiscoveredPlugin | RejectedPlugin {
  if (!PLUGIN_NAME_PATTERN.test(name)) return { name, reason: `plugin folder name must match ${PLUGIN_NAME_PATTERN}` };
  const file = join(dir, 'manifest.json');
  let manifest: unknown;
  try {
    manifest = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return { name, reason: `manifest.json is not valid JSON: ${(err as Error).message}` };
  }
  if (!validateManifest(manifest)) {
    const failure = describeFailure(validateManifest.errors);
    return { name, reason: `manifest.json: ${failure.field ? `${failure.field}: ` : ''}${failure.message}` };
  }
  const m = manifest as Manifest;
  if (!semver.validRange(m.app_compat)) return { name, reason: `app_compat "${m.app_compat}" is not a semver range` };
  if (!semver.satisfies(appVersion, m.app_compat, { includePrerelease: true })) {
    return { name, reason: `app_compat "${m.app_compat}" does not include Carapace ${appVersion}` };
  }
  const seen = new Set<string>();
  const tools: ToolEntry[] = [];
  for (const decl of m.provides.tools) {
    if (seen.has(decl.name)) return { name, reason: `tool "${decl.name}" is declared twice` };
    seen.add(decl.name);
    try {
      tools.push(compileTool(decl, name, ajv));
    } catch (err) {
      return { name, reason: `tool "${decl.name}": arguments_schema does not compile: ${(err as Error).message}` };
    }
  }
  if (m.config_schema) {
    try {
      ajv.compile(m.config_schema);
    } catch (err) {
      return { name, reason: `config_schema does not compile: ${(err as Error).message}` };
    }
  }
  return { name, dir, manifest: m, tools };
}

export function discoverPlugins(pluginsDir: string, appVersion: string, reservedTools: readonly string[]): Discovery {
  const result: Discovery = { plugins: [], rejected: [] };
  if (!existsSync(pluginsDir)) return result;
  // existsSync never throws: a file, a dangling link or an unreadable entry is simply not a plugin.
  const names = readdirSync(pluginsDir)
    .filter((n) => !n.startsWith('.') && existsSync(join(pluginsDir, n, 'manifest.json')))
    .sort();
  const ajv = createAjv();
  for (const name of names) {
    const loaded = loadPlugin(name, join(pluginsDir, name), appVersion, ajv);
    if ('manifest' in loaded) result.plugins.push(loaded);
    else result.rejected.push(loaded);
  }
  checkConflicts(result.plugins, reservedTools);
  return result;
}

/** Cross-plugin rules: unique tool names, no intrinsic names, one memory_brief provider. */
function checkConflicts(plugins: DiscoveredPlugin[], reservedTools: readonly string[]): void {
  const reserved = new Set(reservedTools);
  const owners = new Map<string, string>();
  let briefProvider: string | null = null;
  for (const plugin of plugins) {
    for (const tool of plugin.tools) {
      if (reserved.has(tool.name)) {
        throw new StartupError('RESERVED_TOOL_NAME', `Plugin "${plugin.name}" declares tool "${tool.name}", a name reserved for the core`);
      }
      const other = owners.get(tool.name);
      if (other !== undefined) {
        throw new StartupError('DUPLICATE_TOOL', `Tool "${tool.name}" is declared by both plugin "${other}" and plugin "${plugin.name}"`);
      }
      owners.set(tool.name, plugin.name);
    }
    if (plugin.manifest.provides.hooks.includes('memory_brief')) {
      if (briefProvider !== null) {
        throw new StartupError('DUPLICATE_HOOK', `Both plugin "${briefProvider}" and plugin "${plugin.name}" declare the memory_brief hook; at most one may`);
      }
      briefProvider = plugin.name;
    }
  }
}
