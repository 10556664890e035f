// Notices when one file's content changes, robustly: fs.watch on its folder (an editor
// that saves by writing a new file and renaming it over the old one replaces the inode a
// watch on the file itself would follow), a slow poll of its size and times for when
// events do not come (some bind mounts, network file systems), and a content hash, so
// that a touch or an event for another file is nothing. A change is reported only once
// the content has stayed the same for `settleMs`: a file that is briefly empty or half
// written (an editor that truncates first, `echo > file`) is never taken for the edit.
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';

export type FileReading =
  | { kind: 'missing' }
  | { kind: 'text'; text: string }
  /** Larger than `maxBytes`: not read (a flood of bytes costs one stat). */
  | { kind: 'too_large'; bytes: number }
  | { kind: 'unreadable'; message: string };

export interface FileWatchOptions {
  /** Quiet time after the last event before reading (default 150 ms). */
  debounceMs?: number;
  /** The content must read the same again after this long (default 300 ms). */
  settleMs?: number;
  /** The poll that covers for missing events (default 2 s). */
  pollMs?: number;
  maxBytes?: number;
}

export class FileWatch {
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private debounce: NodeJS.Timeout | null = null;
  private lastStat = '';
  private lastHash: string;
  /** One check at a time; an event during one asks for another after it. */
  private checking: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private readonly options: Required<FileWatchOptions>;

  /** `knownHash`: the content already in force (hashOf), reported only once it changes. */
  constructor(
    private readonly file: string,
    knownHash: string,
    private readonly changed: (reading: FileReading) => void,
    options: FileWatchOptions = {},
  ) {
    this.lastHash = knownHash;
    this.options = { debounceMs: 150, settleMs: 300, pollMs: 2000, maxBytes: 1024 * 1024, ...options };
  }

  start(): void {
    const name = basename(this.file);
    try {
      this.watcher = watch(dirname(this.file), { persistent: false }, (_event, filename) => {
        // Some platforms name no file: then it may be ours.
        if (filename === null || filename === name) this.schedule();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = null; // the poll goes on
      });
    } catch {
      // No watch on this folder (it is missing, or the platform has none): the poll is enough.
    }
    this.poll = setInterval(() => void this.polled(), this.options.pollMs);
    this.poll.unref();
  }

  /** Reads the file now (start-up: nothing may have been missed since it was loaded). */
  checkNow(): void {
    this.check();
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
    if (this.debounce) clearTimeout(this.debounce);
  }

  private async polled(): Promise<void> {
    const now = await stat(this.file).then((s) => `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`, () => 'missing');
    if (now === this.lastStat) return;
    this.lastStat = now;
    this.schedule();
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.check(), this.options.debounceMs);
    this.debounce.unref();
  }

  private check(): void {
    if (this.checking) {
      this.again = true;
      return;
    }
    this.checking = this.settled()
      .catch(() => undefined)
      .finally(() => {
        this.checking = null;
        if (this.again && !this.closed) {
          this.again = false;
          this.check();
        }
      });
  }

  /** Reads until two readings `settleMs` apart agree, then reports it if it is new. */
  private async settled(): Promise<void> {
    let [reading, hash] = await this.read();
    for (;;) {
      if (hash === this.lastHash || this.closed) return;
      await new Promise((r) => setTimeout(r, this.options.settleMs));
      const [next, nextHash] = await this.read();
      if (nextHash === hash) break;
      [reading, hash] = [next, nextHash];
    }
    if (this.closed) return;
    this.lastHash = hash;
    this.changed(reading);
  }

  private async read(): Promise<[FileReading, string]> {
    let handle;
    try {
      handle = await open(this.file, 'r');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return code === 'ENOENT' ? [{ kind: 'missing' }, 'missing'] : [{ kind: 'unreadable', message: (err as Error).message }, `unreadable ${code}`];
    }
    try {
      const { size, mtimeMs } = await handle.stat();
      if (size > this.options.maxBytes) return [{ kind: 'too_large', bytes: size }, `large ${size}:${mtimeMs}`];
      // At most one byte past the bound, even if the file grows while it is read.
      const buffer = Buffer.alloc(this.options.maxBytes + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > this.options.maxBytes) return [{ kind: 'too_large', bytes: bytesRead }, `large ${bytesRead}:${mtimeMs}`];
      const text = buffer.subarray(0, bytesRead).toString('utf8');
      return [{ kind: 'text', text }, hashOf(text)];
    } catch (err) {
      return [{ kind: 'unreadable', message: (err as Error).message }, 'unreadable'];
    } finally {
      await handle.close();
    }
  }
}

export function hashOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
