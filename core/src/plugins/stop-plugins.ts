// The plugins' part of a stopping core: each healthy plugin is told (`plugin.stopping`) and
// draining, pending prompts are withdrawn, requests still with a handler are waited for
// (bounded), the bus's last events go out, then the host runs every handler's shutdown()
// and each outcome is audited.
import type { AuditLog } from '../audit/audit-log.js';
import type { Confirmations } from '../confirm/confirmations.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ToolCatalog } from './catalog.js';
import type { PluginHostLink } from './host-link.js';

export interface StopPluginsDeps {
  catalog: ToolCatalog;
  hostLink: PluginHostLink;
  confirmations: Confirmations;
  audit: AuditLog;
  bus: { drained(): Promise<void> };
  publish: (topic: string, group: string | null, payload: JsonObject) => void;
}

export async function stopPlugins(deps: StopPluginsDeps, drainMs: number, shutdownMs: number): Promise<void> {
  const { catalog, hostLink, confirmations, audit } = deps;
  const live = catalog.pluginNames().filter((n) => catalog.state(n) === 'healthy');
  for (const name of live) deps.publish('plugin.stopping', null, { plugin: name });
  for (const name of live) catalog.setState(name, 'draining');
  confirmations.withdrawAll('core: shutting down');
  const deadline = Date.now() + drainMs;
  while (live.some((n) => hostLink.inFlightFor(n) > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await deps.bus.drained().catch(() => undefined);
  const report = await hostLink.shutdown(0, shutdownMs);
  for (const name of live) {
    const result = report?.results.find((r) => r.plugin === name);
    const outcome = result?.outcome ?? 'timeout';
    catalog.setState(name, 'stopped');
    audit.record({ group: null, session: null, source: name, topic: null, correlation: null, stage: 'plugin', outcome: outcome === 'clean' ? 'ok' : 'error', reason: `shutdown ${outcome === 'timeout' ? 'timeout-forced' : outcome}`, detail: result?.detail });
  }
}
