// What the manifest schema's patterns let through but the egress allow-list
// (network/allow-list.ts) would never match or cannot resolve: a port out of
// range, an empty label, a wildcard over a top-level domain, a config_hosts pointer to a
// setting the config_schema does not declare. A plugin declaring such a thing gets a
// network it did not mean to have (usually none), and finds out only when a call fails.
import type { JsonObject } from '../protocol/envelope.js';
import type { Manifest } from './manifest.js';

export interface NetworkProblem {
  severity: 'error' | 'warning';
  message: string;
}

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** One `network.hosts` entry ("host", "host:port", "*.domain[:port]"); null when it is sound. */
export function hostProblem(entry: string): string | null {
  const [hostPart, port, extra] = entry.split(':');
  if (extra !== undefined) return `"${entry}": at most one ":port"`;
  if (port !== undefined && !(Number(port) >= 1 && Number(port) <= 65535)) return `"${entry}": port ${port} is not 1 to 65535`;
  const wildcard = hostPart.startsWith('*.');
  const labels = (wildcard ? hostPart.slice(2) : hostPart).split('.');
  const bad = labels.find((l) => !LABEL.test(l));
  if (bad !== undefined) return `"${entry}": "${bad}" is not a host name label (letters, digits, inner hyphens; no empty label, no trailing dot)`;
  // The allow-list matches "*.<at least two labels>": "*.com" would match nothing.
  if (wildcard && labels.length < 2) return `"${entry}": a wildcard needs a domain of two labels or more ("*.example.com"); this one matches nothing`;
  return null;
}

/** The schema a JSON pointer names inside config_schema (through `properties`), or null. */
function schemaAt(schema: JsonObject, pointer: string): JsonObject | null {
  let node: JsonObject | null = schema;
  for (const key of pointer.split('/').slice(1)) {
    const properties = node?.properties as Record<string, JsonObject> | undefined;
    node = properties && Object.hasOwn(properties, key) ? properties[key] : null;
    if (!node) return null;
  }
  return node;
}

function holdsStrings(schema: JsonObject): boolean {
  if (schema.type === 'string') return true;
  return schema.type === 'array' && (schema.items as JsonObject | undefined)?.type === 'string';
}

/** The problems of a manifest's `network` declaration (already valid against the manifest schema). */
export function checkNetworkDeclaration(manifest: Pick<Manifest, 'network' | 'config_schema'>): NetworkProblem[] {
  const problems: NetworkProblem[] = [];
  for (const entry of manifest.network?.hosts ?? []) {
    const problem = hostProblem(entry);
    if (problem) problems.push({ severity: 'error', message: `network.hosts: ${problem}` });
  }
  for (const pointer of manifest.network?.config_hosts ?? []) {
    if (!manifest.config_schema) {
      problems.push({ severity: 'error', message: `network.config_hosts: "${pointer}" points into the configuration, but the manifest has no config_schema declaring it` });
      continue;
    }
    const target = schemaAt(manifest.config_schema, pointer);
    if (!target) problems.push({ severity: 'error', message: `network.config_hosts: "${pointer}" is not a property config_schema declares (through "properties"): the plugin would reach no server` });
    else if (!holdsStrings(target)) problems.push({ severity: 'warning', message: `network.config_hosts: "${pointer}" is not declared as a string (or an array of strings): only strings holding a URL or "host[:port]" are allowed` });
  }
  return problems;
}
