// The core's side of backups: the daily scheduled one (config `backups`), and what the
// Overview, the Checks page and Activity say about backups. Every backup records its outcome
// in data/backup-status.json (status.ts), whoever made it: `make backup` in its container,
// a scheduled one in the core's container or process. The core looks at that file (after
// each scheduled run, and every 30 s for the ones a person made) and audits each outcome
// once: path, size, files and duration, or the code and reason it failed.
import type { AuditLog } from '../audit/audit-log.js';
import type { BackupSettings } from '../config.js';
import type { BackupRunner } from './runner.js';
import { readStatus, type BackupOutcome, type BackupStatus } from './status.js';

/** What the Overview and the Checks page show. */
export interface BackupView extends BackupStatus {
  schedule: BackupSettings['schedule'];
  at: string;
  keep: number;
  dir: string;
  next_at: string | null;
  running: boolean;
}

export interface ScheduleDeps {
  settings: BackupSettings;
  /** The backups folder, as the person's machine names it (shown). */
  dir: string;
  dataDir: string;
  run: BackupRunner;
  audit: AuditLog;
  now?: () => number;
  /** How often the status file is looked at for backups a person made (default 30 s). */
  pollMs?: number;
  /** After a start with no recent backup, how long until one is made (default 10 min; tests shorten it). */
  catchUpMs?: number;
  /** The core's own log (pino): each outcome, for `docker compose logs core`. */
  log?: { info(fields: object, message: string): void; error(fields: object, message: string): void };
}

const DAY = 24 * 60 * 60 * 1000;
/** At start, a daily schedule whose last backup is older than this catches up soon. */
const OVERDUE = 26 * 60 * 60 * 1000;
const CATCH_UP_AFTER_MS = 10 * 60 * 1000;

/** The next time of day `at` (HH:MM UTC) after `now`. */
export function nextDaily(at: string, now: number): number {
  const [h, m] = at.split(':').map(Number);
  const day = new Date(now);
  const today = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), h, m);
  return today > now ? today : today + DAY;
}

const mb = (bytes: number | undefined): string => `${((bytes ?? 0) / 1024 / 1024).toFixed(1)} MB`;

export class BackupSchedule {
  private timer: NodeJS.Timeout | null = null;
  private poll: NodeJS.Timeout | null = null;
  private nextAt: number | null = null;
  private running: Promise<void> | null = null;
  private audited: string | null;
  private readonly now: () => number;

  constructor(private readonly deps: ScheduleDeps) {
    this.now = deps.now ?? Date.now;
    // What happened before this start was audited then (or by the run that made it).
    this.audited = readStatus(deps.dataDir).last?.id ?? null;
  }

  start(): void {
    this.poll = setInterval(() => this.check(), this.deps.pollMs ?? 30_000);
    this.poll.unref();
    if (this.deps.settings.schedule === 'off') return;
    const lastOk = readStatus(this.deps.dataDir).last_ok_at;
    const overdue = lastOk === null || this.now() - Date.parse(lastOk) > OVERDUE;
    this.arm(overdue ? Math.min(nextDaily(this.deps.settings.at, this.now()), this.now() + (this.deps.catchUpMs ?? CATCH_UP_AFTER_MS)) : nextDaily(this.deps.settings.at, this.now()));
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.poll) clearInterval(this.poll);
    this.timer = this.poll = null;
    this.nextAt = null;
  }

  /** Runs one scheduled backup now (one at a time); resolves when it has ended and is audited. */
  runNow(): Promise<void> {
    this.running ??= this.deps
      .run()
      .catch(() => undefined)
      .finally(() => {
        this.running = null;
        this.check();
      });
    return this.running;
  }

  view(): BackupView {
    const { schedule, at, keep } = this.deps.settings;
    return { ...readStatus(this.deps.dataDir), schedule, at, keep, dir: this.deps.dir, next_at: this.nextAt === null ? null : new Date(this.nextAt).toISOString(), running: this.running !== null };
  }

  /** Audits the latest outcome if it is new. */
  check(): void {
    const last = readStatus(this.deps.dataDir).last;
    if (!last || last.id === this.audited) return;
    this.audited = last.id;
    const entry = this.deps.audit.record(auditEntry(last));
    if (last.ok) this.deps.log?.info({ backup: last }, entry.reason ?? 'backup made');
    else this.deps.log?.error({ backup: last }, entry.reason ?? 'backup failed');
  }

  private arm(at: number): void {
    this.nextAt = at;
    this.timer = setTimeout(() => {
      void this.runNow().finally(() => {
        if (this.nextAt !== null) this.arm(nextDaily(this.deps.settings.at, Math.max(this.now(), at + 60_000)));
      });
    }, Math.max(0, at - this.now()));
    this.timer.unref();
  }
}

export function auditEntry(o: BackupOutcome): Parameters<AuditLog['record']>[0] {
  const base = { group: null, session: null, source: 'backup', topic: null, correlation: null, stage: 'core' as const, duration_ms: o.duration_ms };
  if (o.ok) {
    return { ...base, outcome: 'ok', reason: `backup made (${o.kind}): ${o.path}, ${o.files} files, ${mb(o.bytes)}${o.encrypted ? ', encrypted' : ''}${o.skipped ? `, ${o.skipped} left out` : ''}, ${((o.duration_ms ?? 0) / 1000).toFixed(1)} s` };
  }
  return { ...base, outcome: 'error', code: o.code, reason: `backup failed (${o.kind}): ${o.message ?? 'no reason recorded'}` };
}
