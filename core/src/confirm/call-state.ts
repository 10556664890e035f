// What a high-risk call refers to on the host, as its plugin describes it (a manifest's
// `describe: true`; the handler's describeCall): lines a person reads before approving,
// bound into the hash their answer names, and recorded with a standing approval so that
// the approval holds only while the state stays what the person saw. The state comes from
// the plugin, never from the agent; a plugin that cannot say is shown as such.
import { createHash } from 'node:crypto';

export type CallState = { lines: string[] } | { unavailable: string };

export const MAX_STATE_LINES = 50;
export const MAX_STATE_LINE = 4000;

/** The plugin's answer, checked: what it said, or why it could not be used. */
export function stateFrom(answer: { ok: boolean; value?: unknown; detail?: string }): CallState {
  if (!answer.ok) return { unavailable: answer.detail ?? 'no answer' };
  const lines = answer.value;
  if (!Array.isArray(lines) || !lines.every((l): l is string => typeof l === 'string')) return { unavailable: 'the plugin did not answer with lines of text' };
  if (lines.length > MAX_STATE_LINES || lines.some((l) => l.length > MAX_STATE_LINE)) return { unavailable: `the plugin answered more than ${MAX_STATE_LINES} lines of ${MAX_STATE_LINE} characters` };
  return { lines };
}

/** Names the state exactly; null when there is none to name (no description, or the plugin could not give one). */
export function stateHash(state: CallState | null): string | null {
  if (state === null || 'unavailable' in state) return null;
  return createHash('sha256').update(JSON.stringify(state.lines)).digest('hex');
}
