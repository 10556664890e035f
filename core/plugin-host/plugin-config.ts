// A plugin's configuration: its section of carapace.json, as the core handed it over the
// link, with ${VAR} references filled from the host's environment (.env), validated
// against the manifest's config_schema.
// Every value taken from the environment is treated as a secret by the core's sanitizer.
import type { JsonObject } from '../src/protocol/envelope.js';
import { createAjv, describeFailure } from '../src/plugins/schema-compiler.js';

/** `notConfigured`: the plugin has no settings at all, or its secrets are empty in .env (not a fault). */
export type ConfigResult = { ok: true; config: JsonObject; secrets: string[] } | { ok: false; reason: string; notConfigured: boolean };

const REFERENCE = /\$\{([A-Z_][A-Z0-9_]*)\}/g;
const ajv = createAjv();

export function resolvePluginConfig(raw: JsonObject, schema: JsonObject | undefined, env: NodeJS.ProcessEnv): ConfigResult {
  const secrets: string[] = [];
  const missing: string[] = [];
  const fill = (value: unknown): unknown => {
    if (typeof value === 'string') {
      return value.replace(REFERENCE, (_m, name: string) => {
        const found = env[name];
        if (found === undefined || found === '') {
          missing.push(name);
          return '';
        }
        secrets.push(found);
        return found;
      });
    }
    if (Array.isArray(value)) return value.map(fill);
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]));
    return value;
  };
  const config = fill(raw) as JsonObject;
  if (missing.length > 0) return { ok: false, reason: `environment variable(s) not set: ${[...new Set(missing)].join(', ')} (see .env.example)`, notConfigured: true };
  if (schema) {
    const validate = ajv.compile(schema);
    if (!validate(config)) {
      const failure = describeFailure(validate.errors);
      const unset = Object.keys(raw).length === 0;
      return { ok: false, reason: unset ? 'no settings for it in carapace.json (see carapace.example.json)' : `config: ${failure.message}`, notConfigured: unset };
    }
  }
  return { ok: true, config, secrets };
}
