// A rejection nobody handled or an exception nobody caught, in a plugin's own process: it
// is that plugin's fault, logged and reported to the core (a CRITICAL audit entry),
// bounded so a plugin failing in a loop cannot flood the audit log. After a rejection the
// plugin carries on; after an exception its state cannot be trusted, so its process ends
// and the plugin host starts it again. Other plugins, in their own processes, never notice.
import type { Logger } from 'pino';

export type StrayKind = 'unhandledRejection' | 'uncaughtException';

export interface StrayErrorDeps {
  plugin: string;
  /** Tells the core (reportFault on the plugin's behalf). */
  report: (message: string) => void;
  /** After an uncaught exception (reported, if the bound allows). */
  afterException: () => void;
  log: Logger;
}

/** Reports per minute; a plugin failing in a loop must not flood the audit log. */
const MAX_REPORTS_PER_MINUTE = 10;

export class StrayErrors {
  private window = { start: 0, count: 0 };

  constructor(private readonly deps: StrayErrorDeps) {}

  /** Installs the process-wide handlers; returns their removal. */
  install(): () => void {
    const onRejection = (reason: unknown): void => this.handle('unhandledRejection', reason);
    const onException = (error: unknown): void => this.handle('uncaughtException', error);
    process.on('unhandledRejection', onRejection);
    process.on('uncaughtException', onException);
    return () => {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    };
  }

  handle(kind: StrayKind, error: unknown): void {
    const { plugin } = this.deps;
    const exception = kind === 'uncaughtException';
    if (this.admit()) {
      const what = exception ? 'an uncaught exception' : 'an unhandled promise rejection';
      const after = exception ? 'Its process was restarted' : 'Its other work goes on';
      this.deps.log.error({ plugin, kind, err: error }, `plugin ${plugin}: ${what}`);
      this.deps.report(`${what} in plugin "${plugin}": ${describe(error)}. ${after}; if it keeps happening, the plugin is broken`);
    }
    if (exception) this.deps.afterException();
  }

  private admit(): boolean {
    const now = Date.now();
    if (now - this.window.start >= 60_000) this.window = { start: now, count: 0 };
    return ++this.window.count <= MAX_REPORTS_PER_MINUTE;
  }
}

/** The error's name and message, short: what a person needs to recognize it (the stack goes to the log). */
function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`.slice(0, 300);
  try {
    return String(JSON.stringify(error) ?? String(error)).slice(0, 300);
  } catch {
    return 'a value that cannot be shown';
  }
}
