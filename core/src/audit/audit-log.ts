// The audit log: JSON Lines through pino to a host-side file (rotated, retained, and
// never able to crash or hang the core: see audit-file.ts), plus a bounded in-memory
// window that the diagnostics intrinsic and the getAuditLog service query. The window
// holds exactly what the file gets (repeated rejections are summarised in both), and starts
// with the newest entries the files already hold.
import { EventEmitter } from 'node:events';
import pino from 'pino';
import { AuditFile, type AuditFileEvents, type AuditFileHealth } from './audit-file.js';
import { readAuditHistory } from './audit-history.js';
import { BatchedDestination } from './batched-destination.js';
import { atTurnEnd } from '../boundary/turn-end.js';
import { now } from '../protocol/envelope.js';
import { RepeatSummariser, type RepeatKey } from './repeat-summary.js';

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
  /** A summary line: how many rejections like the burst's first were not written one by one. */
  repeats?: number;
  /** A summary line: a few of those rejections' topics. */
  samples?: string[];
}

export interface AuditLogOptions {
  max_file_mb: number;
  keep_files: number;
  keep_days: number;
  repeat_window_s: number;
  /** How often an unwritable file is probed (tests shorten it). */
  retry_ms?: number;
}

export const AUDIT_DEFAULTS: AuditLogOptions = { max_file_mb: 10, keep_files: 10, keep_days: 30, repeat_window_s: 10 };
/** Open bursts the summariser keeps (sessions × stages × codes) before folding them together. */
const MAX_BURSTS = 10_000;

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

/** `entry`: each entry as written (scrubbed), for live views such as the console's activity stream. */
export type AuditLogEvents = AuditFileEvents & { entry: [AuditEntry] };

export class AuditLog extends EventEmitter<AuditLogEvents> {
  private readonly logger: pino.Logger;
  private readonly destination: BatchedDestination;
  /**
   * Entries recorded in this turn of the event loop, serialized and written at its end,
   * after what the turn sends (boundary/turn-end.ts): a request's way to its handler does
   * not wait for pino or the file.
   */
  private unwritten: AuditEntry[] = [];
  private readonly file: AuditFile;
  private readonly repeats: RepeatSummariser;
  private readonly window: AuditEntry[] = [];
  private start = 0;
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
    options: AuditLogOptions = AUDIT_DEFAULTS,
  ) {
    super();
    this.file = new AuditFile(file, { maxFileMb: options.max_file_mb, keepFiles: options.keep_files, keepDays: options.keep_days, retryMs: options.retry_ms });
    // The operator hears of an outage on the core's own log (stdout), which needs no disk.
    const operator = pino({ base: { service: 'audit' } });
    this.file.on('down', (reason) => {
      operator.error({ file, reason }, 'audit log cannot be written: tool calls are refused until it can');
      this.emit('down', reason);
    });
    this.file.on('up', (lost) => {
      operator.info({ file, lost }, 'audit log writable again');
      this.emit('up', lost);
    });
    this.repeats = new RepeatSummariser(options.repeat_window_s * 1000, MAX_BURSTS, (summary) => this.record(summary));
    // Activity after a restart or an upgrade: what the files already hold (audit-history.ts).
    for (const entry of readAuditHistory(file, capacity)) this.remember(entry);
    this.destination = new BatchedDestination(this.file);
    this.logger = pino({ base: null, timestamp: false, formatters: { level: (label) => ({ level: label }) } }, this.destination);
    process.once('exit', () => {
      this.serialize();
      this.destination.drainAtExit();
    });
  }

  /** False while the file cannot be written: callers refuse anything that would act. */
  get writable(): boolean {
    return this.file.ok;
  }

  health(): AuditFileHealth {
    return this.file.health();
  }

  /** Writes one entry. */
  record(input: AuditInput): AuditEntry {
    const entry = this.stamp(input);
    this.write(entry);
    return entry;
  }

  /**
   * One rejected request's entries: written whole if it opens a burst of rejections like
   * it (same session, stage and code), otherwise counted into that burst's summary.
   */
  recordRejection(key: RepeatKey, entries: AuditEntry[]): void {
    if (!this.repeats.admit(key, entries[0]?.topic ?? null)) return;
    for (const entry of entries) this.write(entry);
  }

  /** Timestamped and scrubbed, not yet written. */
  stamp(input: AuditInput): AuditEntry {
    // Every entry gets the same shape (absent fields undefined, which pino omits): at six
    // entries per request, one hidden class instead of a spread's many is measurable.
    const entry: AuditEntry = {
      timestamp: now(),
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
      repeats: input.repeats,
      samples: input.samples,
    };
    return entry;
  }

  write(entry: AuditEntry): void {
    if (this.unwritten.push(entry) === 1) atTurnEnd('write', this.writeOut);
    this.recorded++;
    this.remember(entry);
    this.emit('entry', entry);
  }

  private readonly writeOut = (): void => {
    this.serialize();
    this.destination.drain();
  };

  /** The unwritten entries as lines, to the destination. */
  private serialize(): void {
    const entries = this.unwritten;
    this.unwritten = [];
    for (const entry of entries) this.logger[entry.severity === 'CRITICAL' ? 'fatal' : LEVEL[entry.outcome]](entry);
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

  /** Resolves once what was recorded so far is on disk, failed, or after a bounded wait. */
  flush(): Promise<void> {
    this.serialize();
    return new Promise((resolve) => this.logger.flush(() => resolve()));
  }

  /** At shutdown: open bursts' summaries are written, then the file is closed (bounded). */
  async close(): Promise<void> {
    this.repeats.sweep(true);
    await this.flush();
    await this.file.close();
  }
}
