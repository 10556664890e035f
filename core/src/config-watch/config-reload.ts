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
  /** Where a plugin's section of `next` (read from `text`) does not fit its config_schema, or null (plugin-sections.ts). */
  checkSections?(next: CoreConfig, text: string): ConfigProblem | null;
}

export class ConfigReload {
  private readonly watch: FileWatch;
  private current: ConfigProblem | null = null;
  /** Readings so far: the first is the file the core started on. */
  private readings = 0;
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
    const first = this.readings++ === 0;
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
    // A plugin's section that its plugin would refuse is refused here, before anything is applied.
    const section = this.target.checkSections?.(next, reading.text) ?? null;
    if (section) return this.broken(section, first);
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

  /** `atStart`: a plugin's section in the file the core started on (no running one to keep). */
  private broken(problem: ConfigProblem, atStart = false): void {
    const said = this.current && new ConfigError(this.current).message === new ConfigError(problem).message;
    this.current = problem;
    if (said) return;
    const where = new ConfigError(problem).message;
    // In the file the core started on, a plugin's section that does not fit keeps only that plugin from running.
    const what = atStart ? 'carapace.json is wrong' : 'carapace.json changed but is broken';
    const kept = atStart ? 'the plugin it concerns does not run until it is fixed' : 'the running configuration stays in force until it is fixed';
    log.error({ file: problem.file, line: problem.line, column: problem.column, pointer: problem.pointer, problem: problem.message }, `${what}: ${kept}`);
    this.target.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', code: 'CONFIG_INVALID', reason: `${what}: ${where}; ${kept}` });
  }

  private fixed(): void {
    if (!this.current) return;
    this.current = null;
    this.target.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: 'carapace.json is valid again' });
  }
}
