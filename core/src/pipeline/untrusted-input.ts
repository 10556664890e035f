// External content (a mail anyone could have sent) is data, not the person's word (DESIGN
// 16). Once it entered a session, a tool whose risk a recipient allow-list may lower stays
// high, and a tool with an effect outside the appliance waits for a person: the text could
// have asked for either. Sticky for the session's life, as a task run's mark is: the
// content stays in the agent's context. A session also starts labelled when what it is
// handed holds labelled text: the earlier conversation, memories, a task's prompt.
import type { Session } from '../boundary/session-table.js';
import type { EventEnvelope, JsonObject } from '../protocol/envelope.js';
import type { ToolEntry } from '../plugins/discovery.js';

/** message.inbound content types that come from outside (anyone may write them). */
export const UNTRUSTED_CONTENT_TYPES: ReadonlySet<string> = new Set(['email']);

/**
 * Does this event bring external content into the turn it starts? A mail, or a task that a
 * session which had read external content scheduled (its prompt is derived from that text).
 */
export function carriesUntrustedInput(event: Pick<EventEnvelope, 'topic' | 'payload'>): boolean {
  if (event.topic === 'task.triggered') return event.payload.external === true;
  const type = event.payload.content_type;
  return event.topic === 'message.inbound' && typeof type === 'string' && UNTRUSTED_CONTENT_TYPES.has(type);
}

/**
 * Does this tool answer put external content into the agent's context? Its tool is marked
 * `untrusted_output` (a mail), or the answer says it holds labelled text at its top level
 * (`external_content: true`: memories a labelled session stored, found by a search).
 */
export function answerCarriesUntrustedInput(tool: Pick<ToolEntry, 'untrusted_output'> | undefined, result: unknown): boolean {
  return tool?.untrusted_output === true || (typeof result === 'object' && result !== null && (result as { external_content?: unknown }).external_content === true);
}

/**
 * A person's own message on a chat channel (`content_type` "text"): the only place a
 * command ("/forget") is read from. A mail saying "/forget" is a stranger's text.
 */
export function isPersonsChatMessage(event: Pick<EventEnvelope, 'topic' | 'payload'>): boolean {
  return event.topic === 'message.inbound' && event.payload.content_type === 'text' && !carriesUntrustedInput(event);
}

/** The value at a JSON pointer (RFC 6901), or undefined. */
function at(root: unknown, pointer: string): unknown {
  let node = root;
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

const address = (value: string): string => value.trim().toLowerCase();

/**
 * The risk a `low_risk_recipients` tool's call has: its manifest's risk (high), lowered to
 * low only when the arguments name at least one address, every one of them is in the
 * group's list in the plugin's configuration, and no untrusted input entered the session
 * (unless that configuration says "allow_list" at `untrusted_turns`). Anything unexpected
 * (no list, a value that is not a string) keeps it high.
 */
export function recipientRisk(
  tool: Pick<ToolEntry, 'risk_level' | 'low_risk_recipients'>,
  base: 'low' | 'high',
  session: Pick<Session, 'group' | 'untrustedInput'>,
  args: JsonObject | undefined,
  pluginConfig: JsonObject | undefined,
): 'low' | 'high' {
  const rule = tool.low_risk_recipients;
  if (base !== 'high' || !rule || !args || !pluginConfig) return base;
  if (session.untrustedInput && (!rule.untrusted_turns || at(pluginConfig, rule.untrusted_turns) !== 'allow_list')) return 'high';
  const list = at(pluginConfig, rule.config.replaceAll('{group}', session.group));
  if (!Array.isArray(list)) return 'high';
  const allowed = new Set(list.filter((v): v is string => typeof v === 'string').map(address));
  let named = 0;
  for (const name of rule.arguments) {
    const value = args[name];
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) {
      if (typeof one !== 'string' || !allowed.has(address(one))) return 'high';
      named++;
    }
  }
  return named > 0 ? 'low' : 'high';
}
