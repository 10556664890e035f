// Which successful tool calls are replies to a person (manifest `reply`), and whether one
// answers a given turn. A chat's send tool answers whatever turn it is made in; a mail
// answers a turn only when it goes to someone whose message the turn is about.
import type { ToolCatalog } from '../plugins/catalog.js';
import type { EventEnvelope, JsonObject } from '../protocol/envelope.js';
import type { Reply, ReplyFailure } from '../core-types.js';
import type { PipelineDeps } from '../pipeline/pipeline.js';
import { answerCarriesUntrustedInput } from '../pipeline/untrusted-input.js';

export interface ReplyTarget {
  /** The channel plugin that delivered it. */
  plugin: string;
  /** The addresses it went to, lower-cased, for a tool whose rule names them; undefined: it answers any turn. */
  to?: string[];
}

const address = (value: string): string => value.trim().toLowerCase();

/** A successful call of `name` with `args` as a reply, or null when it is none (not a channel plugin's, or not declared one). */
export function replyOf(catalog: ToolCatalog, name: string, args: JsonObject): ReplyTarget | null {
  const tool = catalog.lookup(name);
  if (!tool || tool.owner === 'core' || !catalog.isChannel(tool.owner)) return null;
  const rule = tool.reply ?? tool.name.startsWith('send_');
  if (rule === false) return null;
  if (rule === true) return { plugin: tool.owner };
  const to: string[] = [];
  for (const name of rule.to) {
    const value = args[name];
    for (const one of Array.isArray(value) ? value : [value]) if (typeof one === 'string') to.push(address(one));
  }
  return { plugin: tool.owner, to };
}

/**
 * Does `reply` answer the turn these events started? Any reply does, unless it names its
 * recipients and the turn answers people's messages: then one of those people must be
 * among them (through the same plugin). A task's turn has nobody waiting for an answer.
 */
export function answersTurn(reply: ReplyTarget, causes: readonly EventEnvelope[]): boolean {
  const messages = causes.filter((c) => c.topic === 'message.inbound');
  if (reply.to === undefined || messages.length === 0) return true;
  const to = new Set(reply.to);
  return messages.some((c) => c.source === reply.plugin && typeof c.payload.sender === 'string' && to.has(address(c.payload.sender)));
}

/** What the core makes of each finished call (the pipeline's `failed` and `succeeded`). */
export interface CallOutcomeDeps {
  catalog: ToolCatalog;
  emit: { replyFailed(failure: ReplyFailure): void; replied(reply: Reply): void };
  markUntrustedInput(session: string): void;
  scrub(text: string): string;
}

/** A reply that failed is told (scrubbed); one that went through is told; an answer holding external content labels its session. */
export function callOutcomes(deps: CallOutcomeDeps): Pick<PipelineDeps, 'failed' | 'succeeded'> {
  return {
    failed: (session, tool, args, error) => {
      if (replyOf(deps.catalog, tool, args)) deps.emit.replyFailed({ session: session.id, group: session.group, tool, code: error.code, message: deps.scrub(error.message) });
    },
    succeeded: (session, tool, args, result) => {
      // What the tool answered is external content: it is in the agent's context now.
      if (answerCarriesUntrustedInput(deps.catalog.lookup(tool), result)) deps.markUntrustedInput(session.id);
      const reply = replyOf(deps.catalog, tool, args);
      if (reply) deps.emit.replied({ session: session.id, group: session.group, tool, arguments: args, ...reply });
    },
  };
}
