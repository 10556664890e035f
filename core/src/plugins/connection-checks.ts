// Connection checks for the console's Checks page: for each configured plugin whose manifest
// declares the `connection_check` hook, "can it reach and log in to its server now, and if
// not, at which step and in the server's words". The check runs in the plugin's own
// process (it holds the secrets and its way out; the core never sees a password); the core
// asks for it over the host link, bounded (15 s, one at a time per plugin: a second ask
// joins the first), and takes nothing on trust: the answer is checked, bounded, scrubbed of
// every secret the host told it of, with hidden characters shown as escapes. The latest
// result per plugin is kept for the page (in memory).
import type { AuditLog } from '../audit/audit-log.js';
import { CONNECTION_STEPS, type ConnectionStep } from '../../sdk/connection-check.js';
import { bound, escapeText } from '../text/escape.js';
import type { ToolCatalog } from './catalog.js';

export const CONNECTION_CHECK_HOOK = 'connection_check';
export const CONNECTION_CHECK_TIMEOUT_MS = 15_000;
/** Results one check may give (a plugin with a few servers), and how long each text may be. */
const MAX_RESULTS = 8;
const MAX_NAME = 200;
const MAX_MESSAGE = 1000;

export interface ConnectionResult {
  name: string;
  ok: boolean;
  step: ConnectionStep;
  message: string;
}

export interface ConnectionReport {
  plugin: string;
  /** When it finished. */
  at: string;
  ok: boolean;
  results: ConnectionResult[];
  /** Why there are no results (the plugin host is away, the check did not answer in time, ...), or null. */
  error: string | null;
}

export interface ConnectionCheckRow {
  plugin: string;
  running: boolean;
  last: ConnectionReport | null;
}

export interface ConnectionCheckDeps {
  catalog: Pick<ToolCatalog, 'declaring'>;
  /** Asks the plugin host (host-link.ts connectionCheck). */
  ask: (plugin: string, timeoutMs: number) => Promise<{ ok: boolean; value?: unknown; detail?: string }>;
  /** Whether carapace.json has settings for the plugin (a plugin without any has nothing to check). */
  configured: (plugin: string) => boolean;
  scrub: (text: string) => string;
  audit: Pick<AuditLog, 'record'>;
  timeoutMs?: number;
}

/** Text from a plugin for a person: secrets out, one line, hidden characters as escapes, bounded. */
function words(text: unknown, scrub: (text: string) => string, max: number): string {
  return bound(escapeText(scrub(String(text ?? '')).replace(/\s+/g, ' ').trim()), max);
}

/** A plugin's answer as results, or why it cannot be taken. */
export function checkedResults(value: unknown, scrub: (text: string) => string): ConnectionResult[] | string {
  if (!Array.isArray(value) || value.length === 0) return 'the plugin\'s check answered no result';
  const results: ConnectionResult[] = [];
  for (const item of value.slice(0, MAX_RESULTS)) {
    const r = (item ?? {}) as Record<string, unknown>;
    if (typeof r.ok !== 'boolean' || typeof r.name !== 'string' || typeof r.message !== 'string') return 'the plugin\'s check answered in a form the core does not take';
    const step = CONNECTION_STEPS.includes(r.step as ConnectionStep) ? (r.step as ConnectionStep) : 'connect';
    results.push({ name: words(r.name, scrub, MAX_NAME), ok: r.ok, step, message: words(r.message, scrub, MAX_MESSAGE) });
  }
  return results;
}

export class ConnectionChecks {
  private readonly running = new Map<string, Promise<ConnectionReport>>();
  private readonly last = new Map<string, ConnectionReport>();

  constructor(private readonly deps: ConnectionCheckDeps) {}

  /** Plugins with a check to offer now: declared by their manifest, and configured. */
  offered(): string[] {
    return this.deps.catalog.declaring(CONNECTION_CHECK_HOOK).filter((plugin) => this.deps.configured(plugin));
  }

  list(): ConnectionCheckRow[] {
    return this.offered().map((plugin) => ({ plugin, running: this.running.has(plugin), last: this.last.get(plugin) ?? null }));
  }

  /** Runs the plugin's check (or joins the one running); null when the plugin offers none. */
  run(plugin: string, by: string): Promise<ConnectionReport> | null {
    if (!this.offered().includes(plugin)) return null;
    const running = this.running.get(plugin);
    if (running) return running;
    const check = this.check(plugin, by).finally(() => this.running.delete(plugin));
    this.running.set(plugin, check);
    return check;
  }

  private async check(plugin: string, by: string): Promise<ConnectionReport> {
    const { ask, scrub, audit } = this.deps;
    const timeoutMs = this.deps.timeoutMs ?? CONNECTION_CHECK_TIMEOUT_MS;
    const answer = await ask(plugin, timeoutMs);
    const taken = answer.ok ? checkedResults(answer.value, scrub) : words(answer.detail ?? 'no answer', scrub, MAX_MESSAGE);
    const results = Array.isArray(taken) ? taken : [];
    const error = Array.isArray(taken) ? null : taken;
    const report: ConnectionReport = { plugin, at: new Date().toISOString(), ok: error === null && results.every((r) => r.ok), results, error };
    this.last.set(plugin, report);
    const summary = error ?? results.map((r) => `${r.name}: ${r.ok ? 'ok' : `failed at ${r.step}`}`).join('; ');
    audit.record({ group: null, session: null, source: by, topic: null, correlation: null, stage: 'plugin', outcome: report.ok ? 'ok' : 'error', reason: `connection check of plugin "${plugin}": ${summary}` });
    return report;
  }
}
