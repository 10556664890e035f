// Core configuration: one JSON file (volumes/config/carapace.json), validated at start-up
// with every default spelled out here. Plugin settings live under "plugins".
import { existsSync, readFileSync, statSync } from 'node:fs';
import { StartupError } from './protocol/errors.js';
import type { JsonObject } from './protocol/envelope.js';
import { createAjv, describeFailure, type SchemaFailure } from './plugins/schema-compiler.js';
import { ConfigError, settingProblem, syntaxProblem } from './config-errors.js';
import { DEFAULT_PRICES, priceSchema, type ModelPrice } from './llm/prices.js';

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
  /**
   * After a handler's deadline its signal is aborted; this long it has to say it stopped
   * before acting (then the call is a retriable PLUGIN_TIMEOUT, else RESULT_UNKNOWN).
   */
  handler_abort_grace_ms: number;
  confirmation_timeout_ms: number;
  confirmations: ConfirmationSettings;
  shutdown_timeout_ms: number;
  plugins: Record<string, JsonObject>;
  agents: AgentSettings;
  llm: LlmSettings;
  audit: AuditSettings;
  sessions: SessionLimits;
  conversation: ConversationSettings;
  backups: BackupSettings;
  sandbox: SandboxSettings;
  /** Each skill's settings (skills/<name>/skill.json's config_schema says what they may be), by skill name. */
  skills: Record<string, JsonObject>;
}

/**
 * Where the agent's programs run (run_program, core/src/sandbox-runs/): one container per
 * session, never the agent's own, created on the first run and removed with the session or
 * after `idle_minutes` without a run.
 */
export interface SandboxSettings {
  /** The image runs start from (Dockerfile.sandbox, built by `make images`). */
  image: string;
  /** The OCI runtime: "agents" (default) is whatever the agents run under (gVisor where the engine has it). */
  runtime: 'agents' | 'runsc' | 'runc';
  memory_mb: number;
  cpus: number;
  /** Processes and threads of a run at once (under runsc the engine counts gVisor's own host threads too: see container-spec.ts). */
  pids: number;
  /** The longest `timeout_s` a run may ask for. */
  timeout_s: number;
  /** A session's sandbox is removed after this long without a run. */
  idle_minutes: number;
}

/** Scheduled backups (core/src/backup/; `make backup` makes one at any time). */
export interface BackupSettings {
  /** "daily": one backup a day at `at`; "off": only the ones a person makes. */
  schedule: 'daily' | 'off';
  /** When the daily backup runs, HH:MM in UTC. */
  at: string;
  /** Scheduled archives kept, the newest; older scheduled ones are removed (a person's own never). */
  keep: number;
  /**
   * The folder, as the core sees it. Unset: CARAPACE_BACKUP_DIR, else ./backups (in Compose
   * /app/backups, the host's ${CARAPACE_BACKUPS:-./backups}).
   */
  dir?: string;
}

export interface LlmBudget {
  /** Model tokens (input, cache and output) a group may use per UTC day. */
  tokens_per_day: number;
  /** Model requests a group may make per minute. */
  requests_per_minute: number;
  /** Model tokens a group may use per UTC calendar month (none if absent). */
  tokens_per_month?: number;
  /** What a group's model use may cost per UTC day and month, in USD by `llm.prices` (none if absent). */
  usd_per_day?: number;
  usd_per_month?: number;
}

/** What the whole appliance may use, all groups together (none if absent). */
export interface ApplianceBudget {
  tokens_per_day?: number;
  tokens_per_month?: number;
  usd_per_day?: number;
  usd_per_month?: number;
}

/** What the LLM proxy lets an agent do with the owner's model credential. */
export interface LlmSettings {
  /** Exact model names an agent may ask for; each needs a price. */
  models: string[];
  /** USD per million tokens, per model: the defaults (prices.ts) with carapace.json's on top. */
  prices: Record<string, ModelPrice>;
  /** The largest max_tokens a request may ask for. */
  max_tokens: number;
  /** The budget of every group, unless `group_budgets` says otherwise. */
  budget: LlmBudget;
  group_budgets: Record<string, Partial<LlmBudget>>;
  appliance_budget: ApplianceBudget;
  /** The owner is told once per budget and window when this share of it is used. */
  notice_at_percent: number;
  /** Model requests one agent session may have in flight at once. */
  max_concurrent_requests: number;
}

/** Each group's conversation as the person saw it, kept by the core (core/src/conversation/). */
export interface ConversationSettings {
  /** Messages older than this are dropped. */
  keep_days: number;
  /** Messages kept per group, newest; 0 keeps none (and a new session gets none). */
  keep_messages: number;
  /** Bytes of text kept per group, newest messages first. */
  keep_kb: number;
  /** At most this many of the latest messages go into a new session's first prompt (0: none). */
  brief_messages: number;
  /** ...and at most this many characters of them (older messages are left out first). */
  brief_chars: number;
}

/** The audit log's bounds on disk (core/src/audit/). */
export interface AuditSettings {
  /** The current file rotates once it reaches this size. */
  max_file_mb: number;
  /** Rotated files kept (audit.jsonl.1 … .N), besides the current one. */
  keep_files: number;
  /** Rotated files older than this are removed. */
  keep_days: number;
  /** Repeated identical rejections (same session, stage, code) in this window become one summary line. */
  repeat_window_s: number;
}

/**
 * What one agent session may cost the core, whatever it sends (see boundary/session-guard.ts).
 * A legitimate agent runs ipc one or a few calls at a time and never comes near these.
 */
export interface SessionLimits {
  /** Requests of any kind, valid or not, refilled continuously; beyond it RATE_LIMITED. */
  requests_per_minute: number;
  burst: number;
  /** Request bytes, counted the same way: a 1 MB request costs the core far more than a small one. */
  bytes_per_minute: number;
  burst_bytes: number;
  /**
   * Refusals (rate or in-flight) a session may collect per minute before it is quarantined;
   * a refused frame counts once per 64 KiB it holds.
   */
  refusals_per_minute: number;
  /** Requests being processed at once; more are refused (and count as refusals). */
  max_in_flight: number;
  /** Simultaneous connections to the session socket; one more quarantines. */
  max_connections: number;
  /** Replies libzmq holds per connection for a peer that is not reading (ZMQ_SNDHWM). */
  reply_high_water_mark: number;
  /** A reply that cannot be queued for this long means the peer does not read: quarantine. */
  reply_timeout_ms: number;
}

export interface ConfirmationSettings {
  /** At most this many confirmations wait for a person per group; more are refused (CONFIRMATION_LIMIT). */
  max_pending_per_group: number;
  /** How often a waiting caller is told "still pending"; a caller that cannot be reached withdraws its request. */
  keepalive_ms: number;
  /**
   * Tools whose high-risk calls may carry characters no person can check (tag characters,
   * bidi embeddings, overrides and isolates); any other such call is refused before anyone
   * is asked (VALIDATION_FAILED). Default: none.
   */
  allow_hidden_characters: string[];
  /**
   * Tools marked `external_effect` that a session which has read external content (a mail,
   * a web page, or a brief, memory or task holding such text) may call without a person's
   * yes, where their usual risk allows it (a calendar the person alone reads). Default: none.
   */
  allow_after_external_content: string[];
}

export interface AgentSettings {
  image: string;
  /**
   * "legacy": no network; Claude Code is the container's main process, attached to the core.
   * "api": no network either; the container serves an authenticated HTTP API
   * (agent-image/api-server.mjs) on a unix socket the core reaches through a bind mount. In both modes
   * the model is reached only through the core's per-session LLM proxy; the model key
   * never enters a container.
   */
  mode: 'legacy' | 'api';
  /**
   * The OCI runtime of agent containers (agents/sandbox.ts): runsc (gVisor, a user-space
   * kernel) or runc; auto: runsc when the engine has it registered with --host-uds=all.
   */
  runtime: 'auto' | 'runsc' | 'runc';
  idle_timeout_ms: number;
  /** A run longer than this is a hung agent: killed, and the user told. */
  run_timeout_ms: number;
  /**
   * Before an idle agent is removed, one last turn of at most this long to store what it
   * learned (only when the memory plugin serves its group; 0: none).
   */
  last_turn_ms: number;
  memory_mb: number;
  cpus: number;
  pids: number;
  /**
   * Disk quota of each group's workspace, in MiB: an ext4 image of this size, mounted as
   * a Docker volume (agents/storage.ts). 0 turns quotas off (host bind mounts, no limit).
   */
  disk_quota_mb: number;
  /**
   * Size of Claude Code's state (~/.claude) in MiB: a tmpfs of the agent's container, new
   * for each session and gone with it (nothing an agent writes there is read by a later
   * session), apart from the workspace so a full workspace never starves it. It counts
   * against memory_mb.
   */
  state_quota_mb: number;
  /**
   * "loop" (ENOSPC at the quota; needs an engine that can attach loop devices, e.g.
   * rootful Docker) or "watchdog" (bind mounts measured every few seconds; the agent is
   * stopped and the user told past the quota; for rootless engines).
   */
  disk_quota_mode: 'loop' | 'watchdog';
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

const validateConfig = createAjv().compile(configSchema);

export function parseConfig(raw: unknown, origin = 'configuration'): CoreConfig {
  const checked = checkConfig(raw);
  if ('failure' in checked) throw new StartupError('CONFIG_INVALID', `${origin}: ${checked.failure.field ? `${checked.failure.field}: ` : ''}${checked.failure.message}`);
  return checked.config;
}

function checkConfig(raw: unknown): { config: CoreConfig } | { failure: SchemaFailure } {
  const copy = structuredClone(raw ?? {});
  if (!validateConfig(copy)) return { failure: describeFailure(validateConfig.errors) };
  const config = copy as unknown as CoreConfig;
  config.llm.prices = { ...DEFAULT_PRICES, ...config.llm.prices };
  // A model without a price fails closed: its use could not be held to a money budget.
  const unpriced = config.llm.models.find((model) => !config.llm.prices[model]);
  if (unpriced !== undefined) return { failure: { field: 'llm.models', message: `the model "${unpriced}" has no price: add it to llm.prices (USD per million tokens, e.g. {"input": 3, "output": 15})` } };
  return { config };
}

/**
 * A missing file means all defaults; a present but broken one throws a ConfigError that
 * says where (line, column) and what was expected.
 */
export function loadConfig(file: string): CoreConfig {
  if (!existsSync(file)) return parseConfig({}, file);
  return configFromText(file, readFileSync(file, 'utf8'));
}

/** The configuration `text` (the content of `file`) holds, or a ConfigError saying where it is wrong. */
export function configFromText(file: string, text: string): CoreConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(syntaxProblem(file, text) ?? { file, line: 1, column: 1, field: null, message: `not valid JSON: ${(err as Error).message}` });
  }
  const checked = checkConfig(raw);
  if ('failure' in checked) throw new ConfigError(settingProblem(file, text, checked.failure.field, checked.failure.message));
  return checked.config;
}

/**
 * Reads `file` again whenever it changes (size, time; checked every `pollMs`) until it is a
 * valid configuration; `stillBroken` hears each broken version. Other errors are thrown.
 */
export async function validConfigOnceFixed(file: string, stillBroken: (err: ConfigError) => void, pollMs = 1000): Promise<CoreConfig> {
  const stamp = (): string => {
    if (!existsSync(file)) return 'none';
    const s = statSync(file);
    return `${s.size}:${s.mtimeMs}`;
  };
  for (let seen = ''; ; await new Promise((resolve) => setTimeout(resolve, pollMs))) {
    const now = stamp();
    if (now === seen) continue;
    seen = now;
    try {
      return loadConfig(file);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      stillBroken(err);
    }
  }
}
