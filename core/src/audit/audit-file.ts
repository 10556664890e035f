// The audit file on disk. rotating-file-stream rotates it by size and keeps its name
// stable (audit.jsonl is always the current file; older ones are audit.jsonl.1 … .N, the
// oldest dropped), so every reader and `tail -F` follow it unchanged. Retention by age
// is ours: the library only counts files.
//
// A failed write (ENOSPC, EIO, a backlog the disk cannot absorb) is a state, never an
// exception: the file goes "down", what cannot be written is counted (never buffered
// without bound), and a probe every `retryMs` reopens the file and writes a recovery line;
// once that lands the file is "up" again. Callers fail closed while it is down.
import { EventEmitter } from 'node:events';
import { closeSync, fstatSync, openSync, readdirSync, readSync, statSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createStream, type RotatingFileStream } from 'rotating-file-stream';

export interface AuditFileOptions {
  maxFileMb: number;
  keepFiles: number;
  keepDays: number;
  /** How often a down file is probed. */
  retryMs?: number;
  /** Bytes handed to the stream but not yet on disk before the file counts as down. */
  maxBacklogBytes?: number;
}

export interface AuditFileHealth {
  ok: boolean;
  /** Writes that failed since start-up. */
  failures: number;
  /** Entries that could not be written since start-up. */
  lost_entries: number;
  last_error: string | null;
  /** When the current outage began (null while ok). */
  down_since: string | null;
  /** Bytes written to the audit files since start-up. */
  written_bytes: number;
}

export interface AuditFileEvents {
  down: [reason: string];
  up: [lost: number];
}

const DAY_MS = 86_400_000;

export class AuditFile extends EventEmitter<AuditFileEvents> {
  private stream: RotatingFileStream | null = null;
  private downSince: string | null = null;
  private lostInOutage = 0;
  private failures = 0;
  private lost = 0;
  private lastError: string | null = null;
  private written = 0;
  private pending = 0;
  private waiters: (() => void)[] = [];
  private retry: NodeJS.Timeout | null = null;
  private probing = false;
  private closed = false;
  private readonly dir: string;
  private readonly name: string;
  private readonly retryMs: number;
  private readonly maxBacklog: number;
  private readonly prune: NodeJS.Timeout;

  constructor(
    readonly path: string,
    private readonly options: AuditFileOptions,
  ) {
    super();
    this.dir = dirname(path);
    this.name = basename(path);
    this.retryMs = options.retryMs ?? 1000;
    this.maxBacklog = options.maxBacklogBytes ?? 16 * 1024 * 1024;
    this.stream = this.open();
    this.pruneOld();
    this.prune = setInterval(() => this.pruneOld(), 3_600_000).unref();
  }

  get ok(): boolean {
    return this.downSince === null;
  }

  health(): AuditFileHealth {
    return { ok: this.ok, failures: this.failures, lost_entries: this.lost, last_error: this.lastError, down_since: this.downSince, written_bytes: this.written };
  }

  /** One batch of whole lines. Not written (and counted) while the file is down. */
  write(text: string, lines: number): void {
    const stream = this.stream;
    if (this.downSince !== null || stream === null) return this.count(lines);
    if (stream.writableLength > this.maxBacklog) {
      this.count(lines);
      return this.fail(new Error(`audit write backlog over ${this.maxBacklog} bytes`), false);
    }
    this.pending++;
    stream.write(text, (err) => {
      this.settle();
      if (err) {
        this.count(lines);
        this.fail(err, true);
      } else {
        this.written += Buffer.byteLength(text);
      }
    });
  }

  /** Resolves once what was handed over is written (or failed), or after `timeoutMs`. */
  flush(timeoutMs = 2000): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Stops probing and closes the file; bounded (a full disk cannot hold it up). */
  async close(timeoutMs = 2000): Promise<void> {
    this.closed = true;
    clearInterval(this.prune);
    if (this.retry) clearTimeout(this.retry);
    await this.flush(timeoutMs);
    const stream = this.stream;
    this.stream = null;
    if (stream && !stream.destroyed) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        timer.unref();
        stream.end(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private open(): RotatingFileStream {
    // A run that died mid-line (a full disk, a kill) left a fragment: start on a fresh line
    // so this run's first entry is not glued to it.
    const fresh = endsMidLine(this.path) ? '\n' : '';
    const stream = createStream((index: number | Date | null) => (index === null ? this.name : `${this.name}.${String(index)}`), {
      path: `${this.dir}/`,
      size: `${Math.max(1, Math.round(this.options.maxFileMb * 1024))}K`,
      rotate: this.options.keepFiles,
    });
    stream.on('error', (err) => this.fail(err, true));
    stream.on('rotated', () => this.pruneOld());
    if (fresh) stream.write(fresh);
    return stream;
  }

  private count(lines: number): void {
    this.lost += lines;
    if (this.downSince !== null) this.lostInOutage += lines;
  }

  private settle(): void {
    if (--this.pending > 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private fail(err: Error, broken: boolean): void {
    this.failures++;
    this.lastError = `${(err as NodeJS.ErrnoException).code ?? 'ERROR'}: ${err.message}`;
    if (broken && this.stream) {
      const stream = this.stream;
      this.stream = null;
      stream.removeAllListeners('error');
      stream.on('error', () => undefined); // anything still queued fails quietly; it is counted
      stream.destroy();
    }
    if (this.downSince === null) {
      this.downSince = new Date().toISOString();
      this.lostInOutage = 0;
      this.emit('down', this.lastError);
    }
    this.scheduleProbe();
  }

  private scheduleProbe(): void {
    if (this.retry || this.closed) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.probe();
    }, this.retryMs);
    this.retry.unref();
  }

  /** Reopens the file (unless the old stream is merely slow) and writes a recovery line. */
  private probe(): void {
    if (this.probing || this.closed || this.downSince === null) return;
    this.probing = true;
    const stream = this.stream ?? (this.stream = this.open());
    const lost = this.lostInOutage;
    const line = `${JSON.stringify({ level: 'warn', timestamp: new Date().toISOString(), group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', code: 'AUDIT_UNAVAILABLE', reason: `audit log writable again after an outage since ${this.downSince}; ${lost} entries could not be written`, detail: this.lastError ?? undefined })}\n`;
    this.pending++;
    stream.write(line, (err) => {
      this.probing = false;
      this.settle();
      if (err) return this.fail(err, true);
      this.downSince = null;
      this.emit('up', lost);
    });
  }

  /** Retention by age: rotated files older than keep_days go (the library keeps the count). */
  private pruneOld(): void {
    const cutoff = Date.now() - this.options.keepDays * DAY_MS;
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return;
    }
    for (const n of names) {
      if (!n.startsWith(`${this.name}.`) || !/^\d+$/.test(n.slice(this.name.length + 1))) continue;
      try {
        const path = join(this.dir, n);
        if (statSync(path).mtimeMs < cutoff) unlinkSync(path);
      } catch {
        // gone already, or not ours to remove: the next pass tries again
      }
    }
  }
}

/** True when the file exists, is not empty and its last byte is not a newline. */
export function endsMidLine(file: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return false;
  }
  try {
    const { size } = fstatSync(fd);
    if (size === 0) return false;
    const last = Buffer.alloc(1);
    readSync(fd, last, 0, 1, size - 1);
    return last[0] !== 0x0a;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}
