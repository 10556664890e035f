// Core configuration: one JSON file (volumes/config/carapace.json), validated at start-up
// with every default spelled out here. Plugin settings live under "plugins".
import { existsSync, readFileSync, statSync } from 'node:fs';
import { StartupError } from './protocol/errors.js';
import type { JsonObject } from './protocol/envelope.js';
import { createAjv, describeFailure, type SchemaFailure } from './plugins/schema-compiler.js';
import { ConfigError, settingProblem, syntaxProblem } from './config-errors.js';
import { DEFAULT_PRICES, type ModelPrice } from './llm/prices.js';
import { configSchema } from './config-schema.js';

export { configSchema } from './config-schema.js';

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
