// The audit log: JSON Lines through pino to a host-side file, plus a bounded in-memory
// window that the diagnostics intrinsic and the getAuditLog service query.
import pino from 'pino';
import { BatchedDestination } from './batched-destination.js';

export type AuditStage =
  | 'envelope' | 'topic' | 'payload' | 'authorize' | 'rate_limit' | 'confirm' | 'route'
  | 'handler' | 'sanitize' | 'response' | 'plugin' | 'event' | 'session' | 'core' | 'llm' | 'agent';

export type AuditOutcome = 'passed' | 'routed' | 'rejected' | 'sanitized' | 'error' | 'ok' | 'dropped' | 'pending';

export interface AuditEntry {
  timestamp: string;
  group: string | null;
  session: string | null;
  source: string;
  topic: string | null;
  correlation: string | null;
  stage: AuditStage;
  outcome: AuditOutcome;
  reason?: string;
  code?: string;
  severity?: 'CRITICAL';
  duration_ms?: number;
  fields?: string[];
  detail?: string;
}

export type AuditInput = Omit<AuditEntry, 'timestamp'>;

export interface AuditQuery {
  group?: string;
  session?: string;
  correlation?: string;
  topic?: string;
  outcome?: AuditOutcome;
  since?: string;
  until?: string;
  last_n?: number;
}

const LEVEL: Record<AuditOutcome, 'info' | 'warn' | 'error'> = {
  passed: 'info', routed: 'info', ok: 'info', pending: 'info',
  rejected: 'warn', sanitized: 'warn', dropped: 'warn', error: 'error',
};

export class AuditLog {
  private readonly logger: pino.Logger;
  private readonly window: AuditEntry[] = [];
  private start = 0;
  private lastMs = -1;
  private lastIso = '';
  /** Entries recorded since start-up (tests compare it with the file). */
  recorded = 0;

  /**
   * @param scrub applied to free-text fields (reason, detail) so no secret is ever written.
   * @param capacity entries kept in memory for queries; older ones live only in the file.
   */
  constructor(
    file: string,
    private readonly scrub: (text: string) => string,
    private readonly capacity = 50_000,
  ) {
    this.logger = pino(
      { base: null, timestamp: false, formatters: { level: (label) => ({ level: label }) } },
      new BatchedDestination(pino.destination({ dest: file, mkdir: true, sync: false })),
    );
  }

  record(input: AuditInput): AuditEntry {
    // Every entry gets the same shape (absent fields undefined, which pino omits): at six
    // entries per request, one hidden class instead of a spread's many is measurable.
    const entry: AuditEntry = {
      timestamp: this.timestamp(),
      group: input.group,
      session: input.session,
      source: input.source,
      topic: input.topic,
      correlation: input.correlation,
      stage: input.stage,
      outcome: input.outcome,
      reason: input.reason === undefined ? undefined : this.scrub(input.reason),
      code: input.code,
      severity: input.severity,
      duration_ms: input.duration_ms,
      fields: input.fields,
      detail: input.detail === undefined ? undefined : this.scrub(input.detail),
    };
    const level = entry.severity === 'CRITICAL' ? 'fatal' : LEVEL[entry.outcome];
    this.logger[level](entry);
    this.recorded++;
    this.remember(entry);
    return entry;
  }

  /** ISO time, formatted once per millisecond: requests log several entries in one. */
  private timestamp(): string {
    const ms = Date.now();
    if (ms !== this.lastMs) {
      this.lastMs = ms;
      this.lastIso = new Date(ms).toISOString();
    }
    return this.lastIso;
  }

  private remember(entry: AuditEntry): void {
    if (this.window.length < this.capacity) {
      this.window.push(entry);
    } else {
      this.window[this.start] = entry;
      this.start = (this.start + 1) % this.capacity;
    }
  }

  /** Oldest first. Filters are exact matches; `last_n` keeps the newest n. */
  query(q: AuditQuery): AuditEntry[] {
    const ordered = this.start === 0 ? this.window : [...this.window.slice(this.start), ...this.window.slice(0, this.start)];
    const out = ordered.filter(
      (e) =>
        (q.group === undefined || e.group === q.group) &&
        (q.session === undefined || e.session === q.session) &&
        (q.correlation === undefined || e.correlation === q.correlation) &&
        (q.topic === undefined || e.topic === q.topic) &&
        (q.outcome === undefined || e.outcome === q.outcome) &&
        (q.since === undefined || e.timestamp >= q.since) &&
        (q.until === undefined || e.timestamp <= q.until),
    );
    return q.last_n === undefined ? out : out.slice(-q.last_n);
  }

  /** Best effort: pino's async destination may still be writing when this returns. */
  flush(): Promise<void> {
    return new Promise((resolve) => this.logger.flush(() => resolve()));
  }
}
