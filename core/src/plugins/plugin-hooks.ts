// What the core asks plugins besides tool calls: what a `describe` tool's call refers to
// (shown before a person is asked, compared after: confirm/call-state.ts) and the memory
// brief for a new agent. Each bounded in time, failures audited, answers sanitized like
// any plugin output.
import type { AuditLog } from '../audit/audit-log.js';
import { stateFrom, type CallState } from '../confirm/call-state.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { Sanitizer } from '../response/sanitize.js';
import type { ToolCatalog } from './catalog.js';
import type { ToolEntry } from './discovery.js';
import type { PluginHostLink } from './host-link.js';

export interface PluginHookDeps {
  catalog: ToolCatalog;
  hostLink: PluginHostLink;
  audit: AuditLog;
  /** The sanitizer in force now (it learns new secrets as the host tells them). */
  sanitizer: () => Sanitizer;
}

export async function describeState(deps: PluginHookDeps, tool: ToolEntry, group: string, args: JsonObject, session: string, timeoutMs: number): Promise<CallState> {
  const state = stateFrom(await deps.hostLink.callHook(tool.owner, group, timeoutMs, { tool: tool.name, arguments: args, session }));
  if ('unavailable' in state) {
    deps.audit.record({ group, session: null, source: tool.owner, topic: `tool.invoke.${tool.name}`, correlation: null, stage: 'confirm', outcome: 'error', reason: `could not say what the call refers to: ${state.unavailable}` });
    return state;
  }
  return { lines: state.lines.map((line) => deps.sanitizer().scrub(line)) };
}

export async function memoryBrief(deps: PluginHookDeps, group: string, timeoutMs: number): Promise<unknown> {
  const provider = deps.catalog.hookProvider('memory_brief');
  if (!provider) return null;
  const r = await deps.hostLink.callHook(provider, group, timeoutMs);
  if (r.ok) return deps.sanitizer()(r.value).value;
  deps.audit.record({ group, session: null, source: provider, topic: null, correlation: null, stage: 'plugin', outcome: 'error', reason: `memory brief unavailable: ${r.detail ?? 'unknown'}` });
  return null;
}
