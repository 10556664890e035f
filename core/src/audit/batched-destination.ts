// pino's file destination (sonic-boom) measures the byte length of its whole pending
// buffer on every write: at six entries per request that cost more than serializing
// them. Lines written during one turn of the event loop go to the file as one write.
import { writeSync } from 'node:fs';
import pino from 'pino';

type FileDestination = ReturnType<typeof pino.destination>;

export class BatchedDestination {
  private lines: string[] = [];
  private scheduled = false;

  constructor(private readonly file: FileDestination) {
    // At exit only synchronous writes land: what sonic-boom still holds, then the lines
    // gathered since the last drain, straight to its file descriptor.
    process.once('exit', () => {
      try {
        this.file.flushSync();
        const fd = (this.file as unknown as { fd?: unknown }).fd;
        if (this.lines.length > 0 && typeof fd === 'number' && fd >= 0) writeSync(fd, this.lines.join(''));
      } catch {
        // not open yet, or already closed: nothing more can be done at exit
      }
      this.lines = [];
    });
  }

  write(line: string): void {
    this.lines.push(line);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.drain);
    }
  }

  /** Called by pino's logger.flush(). */
  flush(done: (err?: Error) => void): void {
    this.drain();
    this.file.flush(done);
  }

  private readonly drain = (): void => {
    this.scheduled = false;
    if (this.lines.length === 0) return;
    const text = this.lines.join('');
    this.lines = [];
    this.file.write(text);
  };
}
