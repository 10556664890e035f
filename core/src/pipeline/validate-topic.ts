// Stage 2: the topic must name a tool in the catalog.
import type { ToolCatalog } from '../plugins/catalog.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import { TOOL_TOPIC_PREFIX } from '../protocol/envelope.js';

export function validateTopic(topic: string, catalog: ToolCatalog): { tool: ToolEntry } | { error: ErrorPayload } {
  const tool = topic.startsWith(TOOL_TOPIC_PREFIX) ? catalog.lookup(topic.slice(TOOL_TOPIC_PREFIX.length)) : undefined;
  if (tool) return { tool };
  // The topic is echoed only when short and printable: it came from the untrusted side.
  const shown = /^[\x20-\x7e]{1,80}$/.test(topic) ? `"${topic}"` : 'the requested topic';
  return { error: pipelineError('UNKNOWN_TOOL', `No tool matches ${shown}; call list_tools to see what exists`, false, { stage: 2 }) };
}
