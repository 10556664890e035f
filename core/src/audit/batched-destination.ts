// pino's file destination (sonic-boom) measures the byte length of its whole pending
// buffer on every write: at six entries per request that cost more than serializing
// them. Here pino's lines are gathered, and go to the file as one write when the audit
// log drains them (once per turn of the event loop: audit-log.ts).
import { appendFileSync } from 'node:fs';
import type { AuditFile } from './audit-file.js';

export class BatchedDestination {
  private lines: string[] = [];

  constructor(private readonly file: AuditFile) {}

  write(line: string): void {
    this.lines.push(line);
  }

  /** What was gathered, to the file in one write. */
  drain(): void {
    if (this.lines.length === 0) return;
    const lines = this.lines;
    this.lines = [];
    this.file.write(lines.join(''), lines.length);
  }

  /** Called by pino's logger.flush(). */
  flush(done: (err?: Error) => void): void {
    this.drain();
    void this.file.flush().then(() => done());
  }

  /**
   * At exit only a synchronous write lands: the lines gathered since the last drain get
   * one attempt, never a retry loop (a full disk must not keep a dying process alive).
   */
  drainAtExit(): void {
    const lines = this.lines;
    this.lines = [];
    if (lines.length === 0 || !this.file.ok) return;
    try {
      appendFileSync(this.file.path, lines.join(''));
    } catch {
      // nothing more can be done at exit
    }
  }
}
