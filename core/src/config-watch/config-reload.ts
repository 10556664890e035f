// carapace.json changed: read it (file-watch.ts), check it whole, and either apply what
// takes effect live (one audit entry, in names: config-diff.ts) or keep the running
// configuration and say where the file is wrong, the way safe mode does (line, column,
// what was expected), on the Overview and the Checks page until it is fixed. A change
// takes effect everywhere or nowhere: the core applies it and hands the plugin host the
// new sections in one step, and a broken file changes nothing anywhere.
//
// Pairing writes the file too, after applying its change in place: reading that write
// finds nothing new, so it is applied once, and nothing fights.
import pino from 'pino';
import type { AuditLog } from '../audit/audit-log.js';
import { configFromText, type CoreConfig } from '../config.js';
import { ConfigError, type ConfigProblem } from '../config-errors.js';
import { describeDiff, diffConfig, nothingLive, type ConfigDiff } from './config-diff.js';
import { FileWatch, type FileReading, type FileWatchOptions } from './file-watch.js';

const log = pino({ base: { service: 'core' } });

export interface ReloadTarget {
  /** The running configuration. */
  readonly config: CoreConfig;
  /** Takes the live parts of `next` and starts again the plugins whose section changed. */
  apply(next: CoreConfig, diff: ConfigDiff): void;
  readonly audit: AuditLog;
}

export class ConfigReload {
  private readonly watch: FileWatch;
  private current: ConfigProblem | null = null;
  private waiting: string[] = [];

  constructor(
    private readonly file: string,
    private readonly target: ReloadTarget,
    options: FileWatchOptions = {},
  ) {
    // No hash known: the first reading is compared with the running configuration, so an
    // edit made while the core was starting is not missed (and an unchanged file says nothing).
    this.watch = new FileWatch(file, '', (reading) => this.read(reading), options);
  }

  start(): void {
    this.watch.start();
    this.watch.checkNow();
  }

  close(): void {
    this.watch.close();
  }

  /** Where the file on disk is wrong now (the running configuration is the last good one), or null. */
  get problem(): ConfigProblem | null {
    return this.current;
  }

  /** Settings the file changes that take effect only when the core starts again. */
  get waitingForRestart(): string[] {
    return this.waiting;
  }

  private read(reading: FileReading): void {
    if (reading.kind !== 'text') {
      const message =
        reading.kind === 'missing' ? 'the file is missing'
        : reading.kind === 'too_large' ? `the file is ${reading.bytes} bytes; a configuration is far smaller (at most 1 MiB is read)`
        : `the file cannot be read (${reading.message})`;
      return this.broken({ file: this.file, line: 1, column: 1, field: null, message });
    }
    let next: CoreConfig;
    try {
      next = configFromText(this.file, reading.text);
    } catch (err) {
      if (err instanceof ConfigError) return this.broken(err.problem);
      return this.broken({ file: this.file, line: 1, column: 1, field: null, message: String((err as Error)?.message ?? err) });
    }
    this.fixed();
    const diff = diffConfig(this.target.config, next);
    const waitingChanged = diff.waitForRestart.join() !== this.waiting.join();
    this.waiting = diff.waitForRestart;
    if (nothingLive(diff) && !waitingChanged) return; // pairing's own write, a touch, a reformatted file
    if (!nothingLive(diff)) this.target.apply(next, diff);
    const reason = `carapace.json changed: ${describeDiff(diff)}`;
    log.info({ file: this.file, change: reason }, 'configuration applied');
    this.target.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason });
  }

  private broken(problem: ConfigProblem): void {
    const said = this.current && new ConfigError(this.current).message === new ConfigError(problem).message;
    this.current = problem;
    if (said) return;
    const where = new ConfigError(problem).message;
    log.error({ file: problem.file, line: problem.line, column: problem.column, problem: problem.message }, 'carapace.json changed but is broken: the running configuration stays in force');
    this.target.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', code: 'CONFIG_INVALID', reason: `carapace.json changed but is broken: ${where}; the running configuration stays in force until it is fixed` });
  }

  private fixed(): void {
    if (!this.current) return;
    this.current = null;
    this.target.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: 'carapace.json is valid again' });
  }
}
