// Everything `make check-plugin` says about one plugin folder, as findings with a code,
// the file and a message: the manifest as discovery loads it (loadManifest: schema,
// app_compat, every tool's schema and the config_schema compiled), clashes that would stop
// the core's start-up (intrinsic names, the bundled plugins' tools and hooks), the network
// declaration, the handler (handler-check.ts) and the skill's examples (skill-examples.ts).
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { INTRINSIC_NAMES, intrinsicTools } from '../intrinsics/intrinsics.js';
import { APP_VERSION } from '../version.js';
import { discoverPlugins, isSkippedFolder, loadManifest, type DiscoveredPlugin } from './discovery.js';
import { checkHandler } from './handler-check.js';
import { PLUGIN_NAME_PATTERN } from './manifest.js';
import { checkNetworkDeclaration } from './network-declaration.js';
import { checkPluginSkills } from './skill-examples.js';

export interface Finding {
  severity: 'error' | 'warning';
  code: string;
  /** Relative to the plugin folder (or absolute, for a compiled handler elsewhere). */
  file: string;
  line?: number;
  message: string;
}

export interface CheckReport {
  dir: string;
  name: string;
  findings: Finding[];
  tools: number;
  examples: number;
}

export interface CheckOptions {
  /** The project: its bundled plugins (plugins/) and their compiled handlers (dist/plugins/). */
  root: string;
}

const error = (code: string, file: string, message: string, line?: number): Finding => ({ severity: 'error', code, file, message, ...(line ? { line } : {}) });
const warning = (code: string, file: string, message: string): Finding => ({ severity: 'warning', code, file, message });

function nameFindings(name: string): Finding[] {
  if (isSkippedFolder(name)) return [warning('NAME_SKIPPED', '.', `the folder name "${name}" starts with "_" or ".": discovery passes it over (a template); copy it with \`make plugin NAME=<name>\``)];
  if (!PLUGIN_NAME_PATTERN.test(name)) return [error('NAME_INVALID', '.', `the folder name "${name}" is the plugin's name and must match ${PLUGIN_NAME_PATTERN}`)];
  return [];
}

/** Clashes with the intrinsics and the bundled plugins: each would stop the core's start-up. */
function clashFindings(plugin: DiscoveredPlugin, root: string): Finding[] {
  const findings: Finding[] = [];
  const reserved = new Set(INTRINSIC_NAMES);
  for (const tool of plugin.tools) {
    if (reserved.has(tool.name)) findings.push(error('RESERVED_TOOL', 'manifest.json', `tool "${tool.name}" is named like one of the core's own tools`));
  }
  let bundled: DiscoveredPlugin[] = [];
  try {
    bundled = discoverPlugins(join(root, 'plugins'), APP_VERSION, INTRINSIC_NAMES).plugins;
  } catch {
    return findings; // the bundled plugins clash among themselves: not this plugin's finding
  }
  const own = realpathSync(plugin.dir);
  for (const other of bundled.filter((p) => realpathSync(p.dir) !== own)) {
    if (other.name === plugin.name) findings.push(warning('NAME_TAKEN', '.', `a bundled plugin is named "${plugin.name}" too: pick another folder name`));
    const theirs = new Set(other.tools.map((t) => t.name));
    for (const tool of plugin.tools.filter((t) => theirs.has(t.name))) {
      findings.push(error('DUPLICATE_TOOL', 'manifest.json', `tool "${tool.name}" is also the bundled plugin "${other.name}"'s: tool names are global, the core would not start`));
    }
    if (plugin.manifest.provides.hooks.includes('memory_brief') && other.manifest.provides.hooks.includes('memory_brief')) {
      findings.push(error('DUPLICATE_HOOK', 'manifest.json', `the bundled plugin "${other.name}" provides memory_brief already: at most one plugin may`));
    }
  }
  return findings;
}

const CHECK_EXPORT = /\bexport\s+(?:async\s+)?(?:function|const|let|var)\s+checkConnections\b|\bexport\s*\{[^}]*\bcheckConnections\b[^}]*\}/;

export function checkPluginFolder(folder: string, options: CheckOptions): CheckReport {
  const dir = resolve(folder);
  const name = basename(dir);
  const report: CheckReport = { dir, name, findings: [], tools: 0, examples: 0 };
  if (!existsSync(join(dir, 'manifest.json'))) {
    report.findings.push(error('MANIFEST_MISSING', 'manifest.json', 'no manifest.json: this folder is not a plugin'));
    return report;
  }
  report.findings.push(...nameFindings(name));
  const handler = checkHandler(name, dir, join(options.root, 'dist/plugins'));
  const handlerFindings = handler.problems.map((p) => error(p.code, p.file, p.message, p.line));
  const loaded = loadManifest(name, dir, APP_VERSION);
  if (!('manifest' in loaded)) {
    report.findings.push(error('MANIFEST_INVALID', 'manifest.json', loaded.reason.replace(/^manifest\.json: /, '')), ...handlerFindings);
    return report;
  }
  report.tools = loaded.tools.length;
  report.findings.push(...clashFindings(loaded, options.root));
  for (const p of checkNetworkDeclaration(loaded.manifest)) {
    report.findings.push(p.severity === 'error' ? error('NETWORK_INVALID', 'manifest.json', p.message) : warning('NETWORK_SUSPECT', 'manifest.json', p.message));
  }
  report.findings.push(...handlerFindings);
  // A connection check declared (the Checks page offers it) needs the export that runs it.
  if (loaded.manifest.provides.hooks.includes('connection_check') && handler.file && !CHECK_EXPORT.test(readFileSync(handler.file, 'utf8'))) {
    report.findings.push(error('CONNECTION_CHECK_MISSING', 'manifest.json', 'provides.hooks declares "connection_check", but the handler module exports no checkConnections(config, context): the Checks page would offer a test that cannot run'));
  }
  const skills = checkPluginSkills(loaded, intrinsicTools);
  report.examples = skills.examples;
  for (const p of skills.problems) report.findings.push(error(`SKILL_${p.code}`, p.file, `ipc tool.invoke.${p.tool}: ${p.message}`, p.line));
  return report;
}
