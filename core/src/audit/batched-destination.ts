// pino's file destination (sonic-boom) measures the byte length of its whole pending
// buffer on every write: at six entries per request that cost more than serializing
// them. Lines written during one turn of the event loop go to the file as one write.
import pino from 'pino';

type FileDestination = ReturnType<typeof pino.destination>;

export class BatchedDestination {
  private lines: string[] = [];
  private scheduled = false;

  constructor(private readonly file: FileDestination) {
    // Lines still gathered when the process exits are written synchronously.
    process.once('exit', () => {
      this.drain();
      try {
        this.file.flushSync();
      } catch {
        // not open yet, or already closed: nothing more can be done at exit
      }
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
