// A plugin's connection check, in its own process: its handler module's `checkConnections`
// export on the settings and the way out this process was started with, bounded in time
// (the core waits 15 s; the check's signal is aborted a little before). What it answers is
// checked and bounded by the core, which trusts no plugin.
import type { CheckConnections } from '../../sdk/index.js';
import type { StartMessage } from '../child-protocol.js';
import { isJsonData } from './plugin-runner.js';

/** The check's own deadline: before the core's (15 s), so that its words arrive rather than a timeout. */
export const CHECK_DEADLINE_MS = 13_000;

export async function runConnectionChecks(check: { start: StartMessage; run: CheckConnections | null } | null): Promise<{ ok: boolean; value?: unknown; detail?: string }> {
  if (!check) return { ok: false, detail: 'the plugin has not started' };
  if (!check.run) return { ok: false, detail: 'the plugin has no connection check (no checkConnections export)' };
  const signal = AbortSignal.timeout(CHECK_DEADLINE_MS);
  try {
    const config = structuredClone(check.start.config) as Record<string, unknown>;
    const value = await Promise.race([
      check.run(config, { signal, ...(check.start.egressProxy ? { egressProxy: check.start.egressProxy } : {}) }),
      new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error(`the check did not finish within ${CHECK_DEADLINE_MS / 1000} s`)), { once: true })),
    ]);
    return isJsonData(value) ? { ok: true, value } : { ok: false, detail: 'the check answered something that is not plain JSON data' };
  } catch (err) {
    return { ok: false, detail: String((err as Error)?.message ?? err) };
  }
}
