// What the appliance looks like from outside, in Prometheus's format (GET /metrics on the
// admin API, behind its token). One registry per core, so cores in one process (tests)
// never share counters. Labels only ever take values from a bounded set: a tool the
// catalog knows (else "unknown"), a pipeline or handler code, a configured group or plugin.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AuditFileHealth } from '../audit/audit-file.js';
import type { ToolCatalog } from '../plugins/catalog.js';

/** Sources the core does not own: the agent manager and the LLM proxy register them in main.ts. */
export interface AgentCounts {
  running: number;
  starting: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({ name: 'carapace_requests_total', help: 'Tool requests answered, by tool and outcome (ok or the error code)', labelNames: ['tool', 'outcome'], registers: [this.registry] });
  private readonly latency = new Histogram({
    name: 'carapace_pipeline_duration_seconds',
    help: 'Time from a request arriving on its session socket to its answer, by tool',
    labelNames: ['tool'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  private readonly coldStarts = new Histogram({
    name: 'carapace_agent_cold_start_seconds',
    help: 'Event to agent container running, for agents started cold',
    buckets: [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });

  constructor(sources: { catalog: ToolCatalog; audit: () => AuditFileHealth; pendingConfirmations: () => number }) {
    collectDefaultMetrics({ register: this.registry }); // event-loop lag, RSS, heap, GC
    const { catalog, audit, pendingConfirmations } = sources;
    this.gauge('carapace_confirmations_pending', 'Confirmations waiting for a person', [], (g) => g.set(pendingConfirmations()));
    this.gauge('carapace_plugin_healthy', '1 while a plugin is healthy, else 0', ['plugin'], (g) => {
      const healthy = new Set(catalog.health().healthy);
      for (const name of catalog.pluginNames()) g.set({ plugin: name }, healthy.has(name) ? 1 : 0);
    });
    this.gauge('carapace_audit_write_failures', 'Audit writes that failed since start-up', [], (g) => g.set(audit().failures));
    this.gauge('carapace_audit_writable', '1 while the audit log can be written, else 0 (tool calls are refused)', [], (g) => g.set(audit().ok ? 1 : 0));
  }

  /** One answered request; `tool` null when the topic named no known tool. */
  request(tool: string | null, outcome: string, seconds: number): void {
    const label = tool ?? 'unknown';
    this.requests.inc({ tool: label, outcome });
    this.latency.observe({ tool: label }, seconds);
  }

  coldStart(seconds: number): void {
    this.coldStarts.observe(seconds);
  }

  agents(counts: () => AgentCounts): void {
    this.gauge('carapace_agents', 'Agent containers, by state', ['state'], (g) => {
      const now = counts();
      g.set({ state: 'running' }, now.running);
      g.set({ state: 'starting' }, now.starting);
    });
  }

  /** Model tokens used today, per group (the LLM proxy's usage). */
  llmTokens(usage: () => { group: string; input_tokens: number; output_tokens: number }[]): void {
    this.gauge('carapace_llm_tokens_today', 'Model tokens used today (UTC), by group and direction', ['group', 'direction'], (g) => {
      for (const u of usage()) {
        g.set({ group: u.group, direction: 'input' }, u.input_tokens);
        g.set({ group: u.group, direction: 'output' }, u.output_tokens);
      }
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private gauge(name: string, help: string, labelNames: string[], read: (g: Gauge<string>) => void): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        read(this);
      },
    });
  }
}
