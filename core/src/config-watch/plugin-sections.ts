// Each plugin's section of carapace.json, checked by the core against the plugin's
// manifest `config_schema` (ajv, as the plugin host checks it: plugin-host/plugin-config.ts),
// at start and on every edit, so that a section that does not fit is refused before the
// host is handed it: an edit keeps the running configuration everywhere, and the Overview
// and the Checks page say where (line, column, the JSON pointer) and what is wrong.
//
// The host fills `${VAR}` references from its environment first; the core never sees those
// values. A string holding a reference is therefore taken as the value it will be: whatever
// the schema asks of a string's content there (a pattern, a format, a length, an enum) is
// left to the host, which checks the filled-in value. That it is a string is not: a
// reference never becomes a number or an object. As in the host, a plugin without settings
// (an empty or missing section) is "not set up", never wrong.
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { JsonObject } from '../protocol/envelope.js';
import { settingProblemAt, type ConfigProblem } from '../config-errors.js';
import { createAjv, describeFailure } from '../plugins/schema-compiler.js';

const REFERENCE = /\$\{[A-Z_][A-Z0-9_]*\}/;
const ajv = createAjv({ allErrors: true });
/** Compiled once per schema (manifests do not change while the core runs). */
const compiled = new WeakMap<object, ValidateFunction>();

/** The value at an ajv instancePath, and the path as keys (numbers for array indexes). */
function walk(value: unknown, instancePath: string): { value: unknown; path: (string | number)[] } {
  const path: (string | number)[] = [];
  let node = value;
  for (const raw of instancePath.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) {
      path.push(Number(key));
      node = node[Number(key)];
    } else {
      path.push(key);
      node = node !== null && typeof node === 'object' && Object.hasOwn(node, key) ? (node as Record<string, unknown>)[key] : undefined;
    }
  }
  return { value: node, path };
}

/** Can this error be one the host, with the reference filled in, would not make? */
function leftToTheHost(error: ErrorObject, section: unknown): boolean {
  const { value } = walk(section, error.instancePath);
  if (typeof value !== 'string' || !REFERENCE.test(value)) return false;
  // A string stays a string; only inside anyOf/oneOf may another branch take it.
  return error.keyword !== 'type' || /\/(anyOf|oneOf)\//.test(error.schemaPath);
}

const pointerOf = (path: (string | number)[]): string => path.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

/**
 * The first plugin section of `plugins` that does not fit its plugin's config_schema,
 * located in `text` (the file `file`), or null. `schemaOf`: the discovered plugin's schema
 * (undefined: it declares none, or no such plugin is discovered: nothing to check).
 */
export function pluginSectionProblem(file: string, text: string, plugins: Record<string, JsonObject>, schemaOf: (plugin: string) => JsonObject | undefined): ConfigProblem | null {
  for (const [plugin, section] of Object.entries(plugins)) {
    const schema = schemaOf(plugin);
    if (!schema || section === null || typeof section !== 'object' || Object.keys(section).length === 0) continue;
    let validate = compiled.get(schema);
    if (!validate) compiled.set(schema, (validate = ajv.compile(schema)));
    const copy = structuredClone(section);
    if (validate(copy)) continue;
    const errors = (validate.errors ?? []).filter((e) => !leftToTheHost(e, section));
    const error = errors[0];
    if (!error) continue;
    const { path } = walk(section, error.instancePath);
    const params = error.params as Record<string, unknown>;
    // The property named by the error, where there is one (an undeclared one, a missing one).
    const named = error.keyword === 'additionalProperties' ? String(params.additionalProperty) : error.keyword === 'required' ? String(params.missingProperty) : null;
    const at = [...path, ...(named !== null ? [named] : [])];
    const pointer = `/plugins/${plugin.replace(/~/g, '~0').replace(/\//g, '~1')}${pointerOf(at)}`;
    const said = named !== null || error.keyword === 'enum' ? describeFailure([error]).message : (error.message ?? 'is invalid');
    const message = `the settings of plugin "${plugin}" do not fit its config_schema at ${pointer}: ${said}`;
    return settingProblemAt(file, text, ['plugins', plugin, ...(error.keyword === 'required' ? path : at)], message, pointer);
  }
  return null;
}
