// Core configuration: one JSON file (volumes/config/carapace.json), validated at start-up
// with every default spelled out here. Plugin settings live under "plugins".
import { existsSync, readFileSync } from 'node:fs';
import { StartupError } from './protocol/errors.js';
import type { JsonObject } from './protocol/envelope.js';
import { createAjv, describeFailure } from './plugins/schema-compiler.js';

export interface RateLimit {
  per_minute: number;
  burst: number;
}

export interface GroupPolicy {
  /** Tool names this group may call; "*" means every tool. Intrinsics are always allowed. */
  tools: string[];
  /** Plugins that may see this group's requests and events; "*" means all. */
  plugins: string[];
}

export interface CoreConfig {
  groups: Record<string, GroupPolicy>;
  /** Policy for a group not listed in `groups`. */
  default_group: GroupPolicy;
  rate_limit: RateLimit;
  tool_rate_limits: Record<string, RateLimit>;
  handler_timeout_ms: number;
  confirmation_timeout_ms: number;
  confirmations: ConfirmationSettings;
  shutdown_timeout_ms: number;
  plugins: Record<string, JsonObject>;
  agents: AgentSettings;
}

export interface ConfirmationSettings {
  /** At most this many confirmations wait for a person per group; more are refused (CONFIRMATION_LIMIT). */
  max_pending_per_group: number;
  /** How often a waiting caller is told "still pending"; a caller that cannot be reached withdraws its request. */
  keepalive_ms: number;
}

export interface AgentSettings {
  image: string;
  /**
   * "legacy": no network; Claude Code is the container's main process, attached to the core.
   * "api": the container serves an authenticated HTTP API (agent-image/api-server.mjs)
   * on a named network, published on 127.0.0.1 only. In both modes the model is reached
   * only through the core's per-session LLM proxy; the model key never enters a container.
   */
  mode: 'legacy' | 'api';
  /** API mode: the user-defined Docker network agent containers join (created if missing). */
  api_network: string;
  idle_timeout_ms: number;
  /** A run longer than this is a hung agent: killed, and the user told. */
  run_timeout_ms: number;
  memory_mb: number;
  cpus: number;
  pids: number;
}

const policySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    tools: { type: 'array', items: { type: 'string' }, default: ['*'] },
    plugins: { type: 'array', items: { type: 'string' }, default: ['*'] },
  },
};
const rateSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['per_minute'],
  properties: { per_minute: { type: 'number', exclusiveMinimum: 0 }, burst: { type: 'integer', minimum: 1, default: 20 } },
};

export const configSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    groups: {
      type: 'object',
      propertyNames: { pattern: '^[a-zA-Z0-9_-]{1,64}$' },
      additionalProperties: policySchema,
      default: {},
    },
    default_group: { ...policySchema, default: {} },
    rate_limit: { ...rateSchema, default: { per_minute: 120, burst: 30 } },
    tool_rate_limits: { type: 'object', additionalProperties: rateSchema, default: {} },
    handler_timeout_ms: { type: 'integer', minimum: 1, default: 30_000 },
    confirmation_timeout_ms: { type: 'integer', minimum: 1, default: 300_000 },
    confirmations: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        max_pending_per_group: { type: 'integer', minimum: 1, maximum: 100, default: 3 },
        keepalive_ms: { type: 'integer', minimum: 100, maximum: 60_000, default: 10_000 },
      },
    },
    shutdown_timeout_ms: { type: 'integer', minimum: 1, default: 10_000 },
    plugins: { type: 'object', additionalProperties: { type: 'object' }, default: {} },
    agents: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        image: { type: 'string', minLength: 1, default: 'carapace-agent:latest' },
        mode: { enum: ['legacy', 'api'], default: 'legacy' },
        // A user-defined network: "none" cannot publish ports, "host" has no isolation,
        // and the default "bridge" has no name resolution for a containerized core.
        api_network: { type: 'string', pattern: '^(?!(?:none|host|bridge|default)$)[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$', default: 'carapace-agents' },
        idle_timeout_ms: { type: 'integer', minimum: 1000, default: 900_000 },
        run_timeout_ms: { type: 'integer', minimum: 1000, default: 600_000 },
        memory_mb: { type: 'integer', minimum: 128, default: 1024 },
        cpus: { type: 'number', exclusiveMinimum: 0, default: 1 },
        pids: { type: 'integer', minimum: 16, default: 256 },
      },
    },
  },
};

const validateConfig = createAjv().compile(configSchema);

export function parseConfig(raw: unknown, origin = 'configuration'): CoreConfig {
  const copy = structuredClone(raw ?? {});
  if (!validateConfig(copy)) {
    const failure = describeFailure(validateConfig.errors);
    throw new StartupError('CONFIG_INVALID', `${origin}: ${failure.field ? `${failure.field}: ` : ''}${failure.message}`);
  }
  return copy as unknown as CoreConfig;
}

/** A missing file means all defaults; a present but broken one stops start-up clearly. */
export function loadConfig(file: string): CoreConfig {
  if (!existsSync(file)) return parseConfig({}, file);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new StartupError('CONFIG_INVALID', `${file} is not valid JSON: ${(err as Error).message}`);
  }
  return parseConfig(raw, file);
}
