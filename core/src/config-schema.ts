// carapace.json's JSON Schema, with every default spelled out: what config.ts checks a file
// against (and fills in) before the core takes it.
import { priceSchema } from './llm/prices.js';

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

const budgetProperties = {
  tokens_per_day: { type: 'integer', minimum: 0 },
  requests_per_minute: { type: 'integer', minimum: 0 },
  tokens_per_month: { type: 'integer', minimum: 0 },
  usd_per_day: { type: 'number', minimum: 0 },
  usd_per_month: { type: 'number', minimum: 0 },
};

// Defaults from what Claude Code 2.1.330 asks for: claude-opus-5-5 with an API key,
// claude-sonnet-5-5 with an OAuth token, a Haiku as its small/fast model; max_tokens 128000.
const llmSchema = {
  type: 'object',
  additionalProperties: false,
  default: {},
  properties: {
    models: { type: 'array', items: { type: 'string', minLength: 1 }, default: ['claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-haiku-4-5'] },
    prices: { type: 'object', additionalProperties: priceSchema, default: {} },
    max_tokens: { type: 'integer', minimum: 1, default: 128_000 },
    budget: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        tokens_per_day: { ...budgetProperties.tokens_per_day, default: 5_000_000 },
        requests_per_minute: { ...budgetProperties.requests_per_minute, default: 60 },
        tokens_per_month: budgetProperties.tokens_per_month,
        usd_per_day: budgetProperties.usd_per_day,
        usd_per_month: budgetProperties.usd_per_month,
      },
    },
    appliance_budget: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: { tokens_per_day: budgetProperties.tokens_per_day, tokens_per_month: budgetProperties.tokens_per_month, usd_per_day: budgetProperties.usd_per_day, usd_per_month: budgetProperties.usd_per_month },
    },
    notice_at_percent: { type: 'integer', minimum: 1, maximum: 100, default: 80 },
    group_budgets: {
      type: 'object',
      propertyNames: { pattern: '^[a-zA-Z0-9_-]{1,64}$' },
      additionalProperties: { type: 'object', additionalProperties: false, properties: budgetProperties },
      default: {},
    },
    max_concurrent_requests: { type: 'integer', minimum: 1, default: 4 },
  },
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
    handler_abort_grace_ms: { type: 'integer', minimum: 0, maximum: 30_000, default: 2000 },
    confirmation_timeout_ms: { type: 'integer', minimum: 1, default: 300_000 },
    confirmations: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        max_pending_per_group: { type: 'integer', minimum: 1, maximum: 100, default: 3 },
        keepalive_ms: { type: 'integer', minimum: 100, maximum: 60_000, default: 10_000 },
        allow_hidden_characters: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true, default: [] },
        allow_after_external_content: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true, default: [] },
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
        runtime: { enum: ['auto', 'runsc', 'runc'], default: 'auto' },
        idle_timeout_ms: { type: 'integer', minimum: 1000, default: 900_000 },
        run_timeout_ms: { type: 'integer', minimum: 1000, default: 600_000 },
        last_turn_ms: { type: 'integer', minimum: 0, default: 60_000 },
        memory_mb: { type: 'integer', minimum: 128, default: 1024 },
        cpus: { type: 'number', exclusiveMinimum: 0, default: 1 },
        pids: { type: 'integer', minimum: 16, default: 256 },
        disk_quota_mb: { anyOf: [{ const: 0 }, { type: 'integer', minimum: 16 }], default: 2048 },
        state_quota_mb: { type: 'integer', minimum: 16, default: 256 },
        disk_quota_mode: { enum: ['loop', 'watchdog'], default: 'loop' },
      },
    },
    llm: llmSchema,
    audit: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        max_file_mb: { type: 'number', minimum: 0.01, maximum: 10_240, default: 10 },
        keep_files: { type: 'integer', minimum: 1, maximum: 1000, default: 10 },
        keep_days: { type: 'number', exclusiveMinimum: 0, default: 30 },
        repeat_window_s: { type: 'number', minimum: 1, maximum: 3600, default: 10 },
      },
    },
    conversation: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        keep_days: { type: 'number', exclusiveMinimum: 0, maximum: 3650, default: 30 },
        keep_messages: { type: 'integer', minimum: 0, maximum: 10_000, default: 200 },
        keep_kb: { type: 'integer', minimum: 1, maximum: 65_536, default: 512 },
        brief_messages: { type: 'integer', minimum: 0, maximum: 500, default: 20 },
        brief_chars: { type: 'integer', minimum: 0, maximum: 200_000, default: 8000 },
      },
    },
    backups: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        schedule: { enum: ['daily', 'off'], default: 'daily' },
        at: { type: 'string', pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', default: '03:30' },
        keep: { type: 'integer', minimum: 1, maximum: 366, default: 7 },
        dir: { type: 'string', minLength: 1 },
      },
    },
    sandbox: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        image: { type: 'string', minLength: 1, default: 'carapace-sandbox:latest' },
        runtime: { enum: ['agents', 'runsc', 'runc'], default: 'agents' },
        memory_mb: { type: 'integer', minimum: 64, maximum: 65_536, default: 512 },
        cpus: { type: 'number', exclusiveMinimum: 0, maximum: 64, default: 1 },
        pids: { type: 'integer', minimum: 16, maximum: 4096, default: 128 },
        timeout_s: { type: 'integer', minimum: 1, maximum: 300, default: 300 },
        idle_minutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440, default: 15 },
      },
    },
    skills: { type: 'object', default: {}, additionalProperties: { type: 'object' } },
    sessions: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        requests_per_minute: { type: 'number', exclusiveMinimum: 0, default: 1200 },
        burst: { type: 'integer', minimum: 1, default: 200 },
        // At least one request of the largest size (1 MB) must fit in a burst.
        bytes_per_minute: { type: 'integer', minimum: 1_048_576, default: 16 * 1024 * 1024 },
        burst_bytes: { type: 'integer', minimum: 1_114_112, default: 2 * 1024 * 1024 },
        refusals_per_minute: { type: 'integer', minimum: 1, default: 600 },
        max_in_flight: { type: 'integer', minimum: 1, maximum: 1024, default: 32 },
        max_connections: { type: 'integer', minimum: 1, maximum: 1024, default: 64 },
        reply_high_water_mark: { type: 'integer', minimum: 1, maximum: 1000, default: 4 },
        reply_timeout_ms: { type: 'integer', minimum: 100, default: 10_000 },
      },
    },
  },
};
