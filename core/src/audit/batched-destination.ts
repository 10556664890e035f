// pino's file destination (sonic-boom) measures the byte length of its whole pending
// buffer on every write: at six entries per request that cost more than serializing
// them. Lines written during one turn of the event loop go to the file as one write, at
// the end of the next turn: handing a write to the file (stream, promise, thread pool)
// takes tens of microseconds, and what this turn sends (a request on its way to the
// plugin host, batched to the end of the turn too) must not wait behind it.
import { appendFileSync } from 'node:fs';
import type { AuditFile } from './audit-file.js';

export class BatchedDestination {
  private lines: string[] = [];
  private scheduled = false;

  constructor(private readonly file: AuditFile) {
    // At exit only a synchronous write lands: the lines gathered since the last drain get
    // one attempt, never a retry loop (a full disk must not keep a dying process alive).
    process.once('exit', () => {
      const lines = this.lines;
      this.lines = [];
      if (lines.length === 0 || !file.ok) return;
      try {
        appendFileSync(file.path, lines.join(''));
      } catch {
        // nothing more can be done at exit
      }
    });
  }

  write(line: string): void {
    this.lines.push(line);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.nextTurn);
    }
  }

  /** Called by pino's logger.flush(). */
  flush(done: (err?: Error) => void): void {
    this.drain();
    void this.file.flush().then(() => done());
  }

  // An immediate scheduled while immediates run waits for the next turn.
  private readonly nextTurn = (): void => void setImmediate(this.drain);

  private readonly drain = (): void => {
    this.scheduled = false;
    if (this.lines.length === 0) return;
    const lines = this.lines;
    this.lines = [];
    this.file.write(lines.join(''), lines.length);
  };
}
