// skill.json: what a skill is and what it may have. Checked whole before a skill is
// offered (a skill that fails any check is listed with its problem, never half-loaded):
// the schema (ajv), then what a schema cannot say: each host entry as plugins' are checked
// (plugins/network-declaration.ts), each config_hosts pointer into the skill's own
// config_schema, and each secret named for this skill (SKILL_<NAME>_...) so that a skill can
// never ask for the model key, a plugin's token or another skill's secret.
import { hostProblem } from '../plugins/network-declaration.js';
import { createAjv, describeFailure } from '../plugins/schema-compiler.js';
import type { JsonObject } from '../protocol/envelope.js';

export const SKILL_NAME = /^[a-z][a-z0-9-]{0,39}$/;

export interface SkillManifest {
  name: string;
  description: string;
  /** Hosts it may reach through its relay; `public`: any host whose every address is public unicast. None by default. */
  network: { hosts: string[]; public: boolean; config_hosts: string[] };
  /** Environment variables of the core it is handed (SKILL_<NAME>_...), only into its own runs. */
  secrets: string[];
  /** What its section of carapace.json (`skills.<name>`) may hold. */
  config_schema?: JsonObject;
}

const schema: JsonObject = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description'],
  properties: {
    name: { type: 'string', pattern: SKILL_NAME.source },
    description: { type: 'string', minLength: 1, maxLength: 300 },
    network: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        hosts: { type: 'array', maxItems: 32, default: [], items: { type: 'string', minLength: 1, maxLength: 260 } },
        public: { type: 'boolean', default: false },
        config_hosts: { type: 'array', maxItems: 8, default: [], items: { type: 'string', pattern: '^(/[A-Za-z0-9_-]+)+$' } },
      },
    },
    secrets: { type: 'array', maxItems: 16, default: [], uniqueItems: true, items: { type: 'string', pattern: '^[A-Z][A-Z0-9_]{0,127}$' } },
    config_schema: { type: 'object' },
  },
};

const validate = createAjv().compile(schema);

/** SKILL_<NAME>_: the prefix every secret of skill `name` starts with ("web-search" → SKILL_WEB_SEARCH_). */
export function secretPrefix(name: string): string {
  return `SKILL_${name.toUpperCase().replace(/-/g, '_')}_`;
}

/** The skill.json `raw` as a manifest for the folder `folder`, or what is wrong with it. */
export function checkSkillManifest(raw: unknown, folder: string): SkillManifest | { problem: string } {
  const copy = structuredClone(raw);
  if (!validate(copy)) {
    const f = describeFailure(validate.errors);
    return { problem: `skill.json: ${f.field ? `${f.field}: ` : ''}${f.message}` };
  }
  const manifest = copy as unknown as SkillManifest;
  if (manifest.name !== folder) return { problem: `skill.json: name "${manifest.name}" is not its folder's name "${folder}"` };
  for (const entry of manifest.network.hosts) {
    const problem = hostProblem(entry.toLowerCase());
    if (problem) return { problem: `skill.json: network.hosts: ${problem}` };
  }
  for (const pointer of manifest.network.config_hosts) {
    const property = pointer.split('/')[1];
    const declared = (manifest.config_schema?.properties as Record<string, { type?: string }> | undefined)?.[property];
    if (pointer.split('/').length !== 2 || declared?.type !== 'string') return { problem: `skill.json: network.config_hosts: "${pointer}" is not a string property its config_schema declares` };
  }
  if (manifest.config_schema) {
    try {
      createAjv().compile(manifest.config_schema);
    } catch (err) {
      return { problem: `skill.json: config_schema: ${(err as Error).message.split('\n', 1)[0]}` };
    }
  }
  const prefix = secretPrefix(manifest.name);
  const foreign = manifest.secrets.find((s) => !s.startsWith(prefix) || s.length === prefix.length);
  if (foreign) return { problem: `skill.json: secrets: "${foreign}" is not this skill's: a skill's secrets are named ${prefix}...` };
  return manifest;
}

/**
 * A secret `skill` names that another skill's prefix claims more closely: "SKILL_WEB_SEARCH_KEY"
 * asked for by a skill "web" is web-search's. Null when every secret is its own.
 */
export function claimedElsewhere(skill: SkillManifest, others: readonly string[]): string | null {
  for (const secret of skill.secrets) {
    const closer = others.find((o) => o !== skill.name && secretPrefix(o).length > secretPrefix(skill.name).length && secret.startsWith(secretPrefix(o)));
    if (closer) return `skill.json: secrets: "${secret}" belongs to the skill "${closer}"`;
  }
  return null;
}
