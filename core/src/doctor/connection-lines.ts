// `make doctor`'s part of the connection checks (the Checks page's "test the connection
// now"): each configured plugin that talks to a server is tested as the doctor runs, and
// each result becomes a line in the doctor's own form, with a fix where one failed.
import type { ConnectionCheckRow, ConnectionReport } from '../plugins/connection-checks.js';

const MARK = { ok: '✓', fail: '✗' } as const;

/** A plugin's report as the doctor's lines; `ok` false if any part failed. */
export function connectionLines(report: ConnectionReport): { ok: boolean; lines: string[] } {
  const title = `Connection of ${report.plugin}`;
  const fix = `    Fix: check the server, port, user and password of "${report.plugin}" (carapace.json, and .env for the password), then run \`docker compose up -d\`; the console's Checks page runs the same test.`;
  if (report.error !== null || report.results.length === 0) return { ok: false, lines: [`${MARK.fail} ${title}: not tested (${report.error ?? 'no result'}).`, fix] };
  const lines = report.results.map((r) => `${r.ok ? MARK.ok : MARK.fail} ${title}, ${r.name}: ${r.ok ? r.message : `failed at the ${r.step} step: ${r.message}`}`);
  return report.ok ? { ok: true, lines } : { ok: false, lines: [...lines, fix] };
}

/** Runs every offered check through `call` (the admin API), all at once; the lines in the plugins' order. */
export async function testConnections(call: (method: 'GET' | 'POST', path: string) => Promise<unknown>): Promise<{ ok: boolean; lines: string[] }> {
  const { checks } = (await call('GET', '/connection-checks')) as { checks: ConnectionCheckRow[] };
  const done = await Promise.all(checks.map(async ({ plugin }) => {
    try {
      return connectionLines((await call('POST', `/connection-checks/${encodeURIComponent(plugin)}`)) as ConnectionReport);
    } catch (err) {
      return { ok: false, lines: [`${MARK.fail} Connection of ${plugin}: not tested (${(err as Error).message}).`] };
    }
  }));
  return { ok: done.every((d) => d.ok), lines: done.flatMap((d) => d.lines) };
}
