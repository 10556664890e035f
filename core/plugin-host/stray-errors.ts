// A rejection nobody handled or an exception nobody caught would end the whole plugin
// host, and with it every plugin. One that can be traced to a plugin (the async context
// it ran in, or its handler's file in the stack) is logged, reported to the core as that
// plugin's fault, and the host carries on. One that cannot be traced is the host's own:
// the process ends as Node would have ended it (Compose starts it again).
// Not contained here: a synchronous loop in a handler stalls the host's one thread; only
// separate processes can bound that.
import type { Logger } from 'pino';

export type StrayKind = 'unhandledRejection' | 'uncaughtException';

export interface StrayErrorDeps {
  /** The plugin `error` came from, or null. */
  attribute: (error: unknown) => string | null;
  /** Tells the core (reportFault on the plugin's behalf). */
  report: (plugin: string, message: string) => void;
  /** An error that is no plugin's: the host cannot vouch for itself any more. */
  fatal: (kind: StrayKind, error: unknown) => void;
  log: Logger;
}

/** Reports per plugin per minute; a plugin failing in a loop must not flood the audit log. */
const MAX_REPORTS_PER_MINUTE = 10;

export class StrayErrors {
  private readonly counts = new Map<string, { windowStart: number; count: number }>();

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
    let plugin: string | null = null;
    try {
      plugin = this.deps.attribute(error);
    } catch {
      plugin = null;
    }
    if (plugin === null) {
      this.deps.fatal(kind, error);
      return;
    }
    if (!this.admit(plugin)) return;
    const what = kind === 'unhandledRejection' ? 'an unhandled promise rejection' : 'an uncaught exception';
    this.deps.log.error({ plugin, kind, err: error }, `plugin ${plugin}: ${what}; the plugin host carries on`);
    this.deps.report(plugin, `${what} in plugin "${plugin}": ${describe(error)}. Its other work goes on; if it keeps happening, the plugin is broken`);
  }

  private admit(plugin: string): boolean {
    const now = Date.now();
    const entry = this.counts.get(plugin);
    if (!entry || now - entry.windowStart >= 60_000) {
      this.counts.set(plugin, { windowStart: now, count: 1 });
      return true;
    }
    entry.count++;
    return entry.count <= MAX_REPORTS_PER_MINUTE;
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

/** The plugin whose handler file (its folder) appears first in the error's stack, if any. */
export function pluginInStack(error: unknown, handlerDirs: ReadonlyMap<string, string>): string | null {
  const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : '';
  let best: { plugin: string; at: number } | null = null;
  for (const [plugin, dir] of handlerDirs) {
    const at = stack.indexOf(`${dir}/`);
    if (at >= 0 && (best === null || at < best.at)) best = { plugin, at };
  }
  return best?.plugin ?? null;
}
