// Plugin discovery: the filesystem is the registry. Each folder under plugins/ with a
// manifest.json is a plugin named by its folder. A malformed plugin is reported and left
// out; conflicts between plugins stop start-up, naming both. Folders named ".x" or "_x"
// (plugins/_template, a copy parked aside) are not plugins and are passed over silently.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { StartupError } from '../protocol/errors.js';
import type { JsonObject } from '../protocol/envelope.js';
import { manifestSchema, PLUGIN_NAME_PATTERN, type Manifest, type RecipientRule, type ReplyRule } from './manifest.js';
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
  external_effect?: boolean;
  reply?: ReplyRule;
  arguments_schema: JsonObject;
  /** Plugin directory name, or "core" for intrinsics. */
  owner: string;
  /**
   * A core tool that acts (run_program): unlike the read-only intrinsics it follows the
   * group's `tools` allow-list and is refused while the audit log cannot be written.
   */
  acts?: boolean;
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
  decl: Pick<ToolEntry, 'name' | 'description' | 'risk_level' | 'task_run_risk_level' | 'file_arguments' | 'describe' | 'low_risk_recipients' | 'untrusted_output' | 'external_effect' | 'reply' | 'arguments_schema' | 'acts'>,
  owner: string,
  ajv: Ajv = defaultAjv,
): ToolEntry {
  return { ...decl, owner, validate: ajv.compile(decl.arguments_schema) };
}

/** Not a plugin at all, never reported: hidden folders, and "_" ones (templates, copies parked aside). */
export function isSkippedFolder(name: string): boolean {
  return name.startsWith('.') || name.startsWith('_');
}

/** One plugin folder as discovery sees it: its name, then everything loadManifest checks. */
export function loadPlugin(name: string, dir: string, appVersion: string, ajv: Ajv = createAjv()): DiscoveredPlugin | RejectedPlugin {
  if (!PLUGIN_NAME_PATTERN.test(name)) return { name, reason: `plugin folder name must match ${PLUGIN_NAME_PATTERN}` };
  return loadManifest(name, dir, appVersion, ajv);
}

/**
 * A folder's manifest.json: valid against the manifest schema, compatible with this
 * version, every tool's arguments_schema and the config_schema compiled. The folder's
 * name is not checked (`make check-plugin` runs this on plugins/_template too).
 */
export function loadManifest(name: string, dir: string, appVersion: string, ajv: Ajv = createAjv()): DiscoveredPlugin | RejectedPlugin {
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

/**
 * `pluginsDirs`: folders separated by ":", the bundled plugins' first. A conflict among the
 * first folder's plugins stops the start (it is a broken build); a plugin of a later folder
 * (a person's drop-in) that takes a name, a tool name or the memory_brief hook already
 * taken is rejected, with the reason, and the others run.
 */
export function discoverPlugins(pluginsDirs: string, appVersion: string, reservedTools: readonly string[]): Discovery {
  const result: Discovery = { plugins: [], rejected: [] };
  const ajv = createAjv();
  pluginsDirs.split(':').filter(Boolean).forEach((dir, index) => {
    const found: DiscoveredPlugin[] = [];
    for (const name of pluginFolders(dir)) {
      const loaded = loadPlugin(name, join(dir, name), appVersion, ajv);
      if ('manifest' in loaded) found.push(loaded);
      else result.rejected.push(loaded);
    }
    if (index === 0) {
      checkConflicts(found, reservedTools);
      result.plugins.push(...found);
      return;
    }
    for (const plugin of found) {
      if (result.plugins.some((p) => p.name === plugin.name)) {
        // Listed under its folder's path: its name is the installed plugin's, which stays as it is.
        result.rejected.push({ name: join(dir, plugin.name), reason: `a plugin named "${plugin.name}" is already installed` });
        continue;
      }
      try {
        checkConflicts([...result.plugins, plugin], reservedTools);
        result.plugins.push(plugin);
      } catch (err) {
        result.rejected.push({ name: join(dir, plugin.name), reason: (err as Error).message });
      }
    }
  });
  return result;
}

/** A folder's plugin folders, sorted; "_template" and other names starting with "_" or "." are not plugins. */
function pluginFolders(dir: string): string[] {
  if (!existsSync(dir)) return [];
  // existsSync never throws: a file, a dangling link or an unreadable entry is simply not a plugin.
  return readdirSync(dir)
    .filter((n) => !isSkippedFolder(n) && existsSync(join(dir, n, 'manifest.json')))
    .sort();
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
