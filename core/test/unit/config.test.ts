import { describe, it, expect, beforeEach, afterEach } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, parseConfig } from '../../src/config.js';
import { resolvePluginConfig } from '../../plugin-host/plugin-config.js';
import { startupError } from '../support/startup-error.js';
import { DEFAULT_PRICES } from '../../src/llm/prices.js';

const DEFAULTS = {
  groups: {},
  default_group: { tools: ['*'], plugins: ['*'] },
  rate_limit: { per_minute: 120, burst: 30 },
  tool_rate_limits: {},
  handler_timeout_ms: 30_000,
  handler_abort_grace_ms: 2000,
  confirmation_timeout_ms: 300_000,
  confirmations: { max_pending_per_group: 3, keepalive_ms: 10_000, allow_hidden_characters: [], allow_after_external_content: [] },
  shutdown_timeout_ms: 10_000,
  plugins: {},
  agents: { image: 'carapace-agent:latest', mode: 'legacy', runtime: 'auto', idle_timeout_ms: 900_000, run_timeout_ms: 600_000, last_turn_ms: 60_000, memory_mb: 1024, cpus: 1, pids: 256, disk_quota_mb: 2048, state_quota_mb: 256, disk_quota_mode: 'loop' },
  llm: {
    models: ['claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-haiku-4-5'],
    prices: DEFAULT_PRICES,
    max_tokens: 128_000,
    budget: { tokens_per_day: 5_000_000, requests_per_minute: 60 },
    group_budgets: {},
    appliance_budget: {},
    notice_at_percent: 80,
    max_concurrent_requests: 4,
  },
  audit: { max_file_mb: 10, keep_files: 10, keep_days: 30, repeat_window_s: 10 },
  sessions: { requests_per_minute: 1200, burst: 200, bytes_per_minute: 16_777_216, burst_bytes: 2_097_152, refusals_per_minute: 600, max_in_flight: 32, max_connections: 64, reply_high_water_mark: 4, reply_timeout_ms: 10_000 },
  conversation: { keep_days: 30, keep_messages: 200, keep_kb: 512, brief_messages: 20, brief_chars: 8000 },
  backups: { schedule: 'daily', at: '03:30', keep: 7 },
  sandbox: { image: 'carapace-sandbox:latest', runtime: 'agents', memory_mb: 512, cpus: 1, pids: 128, timeout_s: 300, idle_minutes: 15 },
  skills: {},
};

describe('parseConfig', () => {
  it('prices every allowed model, fails closed on a model without a price, and takes prices from the file over the defaults', () => {
    expect(Object.keys(DEFAULTS.llm.prices).sort()).toEqual([...DEFAULTS.llm.models].sort());
    expect(startupError(() => parseConfig({ llm: { models: ['claude-opus-5-5', 'claude-mystery-9'] } })).message).toContain('llm.models: the model "claude-mystery-9" has no price: add it to llm.prices');
    const priced = parseConfig({ llm: { models: ['claude-mystery-9', 'claude-opus-5-5'], prices: { 'claude-mystery-9': { input: 3, output: 15 }, 'claude-opus-5-5': { input: 5, output: 25 } } } }).llm.prices;
    expect(priced['claude-mystery-9']).toEqual({ input: 3, output: 15 });
    expect(priced['claude-opus-5-5']).toEqual({ input: 5, output: 25 });
    expect(priced['claude-haiku-4-5']).toEqual(DEFAULT_PRICES['claude-haiku-4-5']);
    expect(startupError(() => parseConfig({ llm: { prices: { x: { input: -1, output: 1 } } } })).message).toContain('llm.prices.x.input');
    expect(startupError(() => parseConfig({ llm: { budget: { usd_per_day: 'ten' } } })).message).toContain('llm.budget.usd_per_day');
  });

  it('fills in every default for an empty object', () => {
    expect(parseConfig({})).toEqual(DEFAULTS);
  });

  it('treats null/undefined as an empty configuration', () => {
    expect(parseConfig(undefined)).toEqual(DEFAULTS);
    expect(parseConfig(null)).toEqual(DEFAULTS);
  });

  it('takes LLM budgets per group, and refuses a budget field it does not know', () => {
    const c = parseConfig({ llm: { budget: { tokens_per_day: 1000 }, group_budgets: { family: { requests_per_minute: 5 } } } });
    expect(c.llm.budget).toEqual({ tokens_per_day: 1000, requests_per_minute: 60 });
    expect(c.llm.group_budgets).toEqual({ family: { requests_per_minute: 5 } });
    expect(() => parseConfig({ llm: { group_budgets: { family: { dollars: 5 } } } })).toThrow(/llm/);
    expect(() => parseConfig({ llm: { max_tokens: 0 } })).toThrow(/max_tokens/);
  });

  it('does not mutate its input', () => {
    const raw = { groups: { main: {} } };
    parseConfig(raw);
    expect(raw).toEqual({ groups: { main: {} } });
  });

  it('does not share default objects between calls', () => {
    const a = parseConfig({});
    a.default_group.tools.push('mutated');
    a.rate_limit.burst = 1;
    const b = parseConfig({});
    expect(b.default_group.tools).toEqual(['*']);
    expect(b.rate_limit.burst).toBe(30);
  });

  it('fills policy defaults inside listed groups and burst inside rate limits', () => {
    const c = parseConfig({ groups: { family: { tools: ['echo'] } }, tool_rate_limits: { echo: { per_minute: 5 } } });
    expect(c.groups.family).toEqual({ tools: ['echo'], plugins: ['*'] });
    expect(c.tool_rate_limits.echo).toEqual({ per_minute: 5, burst: 20 });
  });

  it('keeps provided values', () => {
    const c = parseConfig({ handler_timeout_ms: 5, rate_limit: { per_minute: 10, burst: 2 }, plugins: { echo: { a: 1 } } });
    expect(c.handler_timeout_ms).toBe(5);
    expect(c.rate_limit).toEqual({ per_minute: 10, burst: 2 });
    expect(c.plugins).toEqual({ echo: { a: 1 } });
  });

  it('rejects an unknown top-level key with CONFIG_INVALID naming it', () => {
    const err = startupError(() => parseConfig({ rate_limits: {} }, 'carapace.json'));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain('carapace.json');
    expect(err.message).toContain('rate_limits');
  });

  it('rejects an unknown key nested in a group, with the field path', () => {
    const err = startupError(() => parseConfig({ groups: { main: { tool: ['x'] } } }));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain('groups.main.tool');
  });

  it('rejects a bad group name key', () => {
    const err = startupError(() => parseConfig({ groups: { 'bad name!': {} } }));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain('groups');
  });

  it('rejects wrong types and out-of-range values', () => {
    expect(startupError(() => parseConfig({ handler_timeout_ms: '30' })).message).toContain('handler_timeout_ms');
    expect(startupError(() => parseConfig({ shutdown_timeout_ms: 0 })).message).toContain('shutdown_timeout_ms');
    expect(startupError(() => parseConfig({ rate_limit: { per_minute: 0 } })).message).toContain('rate_limit.per_minute');
    expect(startupError(() => parseConfig({ rate_limit: { burst: 3 } })).message).toContain('per_minute');
    expect(startupError(() => parseConfig([])).code).toBe('CONFIG_INVALID');
  });

  it('takes backups: a daily schedule at HH:MM UTC, how many to keep, a folder; refuses a time or schedule it does not know', () => {
    expect(parseConfig({ backups: { schedule: 'off', keep: 3, dir: '/srv/backups' } }).backups).toEqual({ schedule: 'off', at: '03:30', keep: 3, dir: '/srv/backups' });
    expect(startupError(() => parseConfig({ backups: { at: '24:00' } })).message).toContain('backups.at');
    expect(startupError(() => parseConfig({ backups: { schedule: 'hourly' } })).message).toContain('backups.schedule');
    expect(startupError(() => parseConfig({ backups: { keep: 0 } })).message).toContain('backups.keep');
  });

  it('takes the sandbox programs run in: image, runtime (the agents\' by default), limits; refuses what it does not know', () => {
    expect(parseConfig({ sandbox: { runtime: 'runc', memory_mb: 1024, timeout_s: 60, idle_minutes: 5 } }).sandbox).toEqual({ image: 'carapace-sandbox:latest', runtime: 'runc', memory_mb: 1024, cpus: 1, pids: 128, timeout_s: 60, idle_minutes: 5 });
    expect(startupError(() => parseConfig({ sandbox: { runtime: 'kata' } })).message).toContain('sandbox.runtime');
    expect(startupError(() => parseConfig({ sandbox: { timeout_s: 301 } })).message).toContain('sandbox.timeout_s');
    expect(startupError(() => parseConfig({ sandbox: { network: true } })).message).toContain('sandbox');
  });

  it('skills: each skill\'s settings, an object (its skill.json checks what is in it)', () => {
    expect(parseConfig({ skills: { 'web-search': { searxng_url: 'http://searx.lan:8080' } } }).skills).toEqual({ 'web-search': { searxng_url: 'http://searx.lan:8080' } });
    expect(startupError(() => parseConfig({ skills: { fetch: 'yes' } })).message).toContain('skills.fetch');
  });
});

describe('loadConfig', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'carapace-config-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('returns all defaults for a missing file', () => {
    expect(loadConfig(join(dir, 'absent.json'))).toEqual(DEFAULTS);
  });

  it('reads and validates a present file', () => {
    const file = join(dir, 'carapace.json');
    writeFileSync(file, JSON.stringify({ groups: { main: { tools: ['echo'], plugins: ['echo'] } }, confirmation_timeout_ms: 1000 }));
    const c = loadConfig(file);
    expect(c.groups.main).toEqual({ tools: ['echo'], plugins: ['echo'] });
    expect(c.confirmation_timeout_ms).toBe(1000);
    expect(c.handler_timeout_ms).toBe(30_000);
  });

  it('throws CONFIG_INVALID naming the file for invalid JSON', () => {
    const file = join(dir, 'carapace.json');
    writeFileSync(file, '{ "groups": ');
    const err = startupError(() => loadConfig(file));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/not valid JSON/);
  });

  it('throws CONFIG_INVALID naming the file and field for a schema failure', () => {
    const file = join(dir, 'carapace.json');
    writeFileSync(file, JSON.stringify({ unknown_option: true }));
    const err = startupError(() => loadConfig(file));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain(file);
    expect(err.message).toContain('unknown_option');
  });
});

describe('the shipped example configuration', () => {
  it('is valid as it stands', () => {
    const file = fileURLToPath(new URL('../../../../volumes/config/carapace.example.json', import.meta.url));
    const config = parseConfig(JSON.parse(readFileSync(file, 'utf8')));
    expect(config.groups.main.tools).toEqual(['*']);
  });
});

describe('the example plugin settings', () => {
  it('satisfy each bundled plugin\'s config_schema', () => {
    const root = fileURLToPath(new URL('../../../../', import.meta.url));
    const config = parseConfig(JSON.parse(readFileSync(join(root, 'volumes/config/carapace.example.json'), 'utf8')));
    const env = { TELEGRAM_BOT_TOKEN: '123456:AAexampleexampleexample', REMINDERS_PASSWORD: 'example-password', CALENDAR_PASSWORD: 'example-password', EMAIL_PASSWORD: 'example-password', GITHUB_TOKEN: 'example-token-123' };
    for (const [plugin, settings] of Object.entries(config.plugins)) {
      const manifest = JSON.parse(readFileSync(join(root, 'plugins', plugin, 'manifest.json'), 'utf8'));
      const resolved = resolvePluginConfig(settings, manifest.config_schema, env);
      expect({ plugin, ok: resolved.ok, reason: resolved.ok ? null : resolved.reason }).toEqual({ plugin, ok: true, reason: null });
    }
  });
});
