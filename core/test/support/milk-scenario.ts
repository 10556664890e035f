// The specification's example conversation, shared by the end-to-end tests of both agent
// modes: the scripted model records "buy milk at 5pm" with a tool, then replies on
// Telegram, then ends the turn.
import { expect } from '@jest/globals';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { toolResults, type Block, type RecordedRequest } from './anthropic-standin.js';

export const USER_MESSAGE = 'remind me to buy milk at 5pm';
export const REPLY = 'Done! Reminder set for 5pm.';

export function milkScript(chat: number): (request: RecordedRequest) => Block[] {
  return (request) => {
    const hasBash = (request.body?.tools ?? []).some((t: { name: string }) => t.name === 'Bash');
    if (!hasBash) return [{ type: 'text', text: 'ok' }];
    const results = toolResults(request);
    if (results.length === 0) {
      return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.echo '{"text":"buy milk at 5pm"}'`, description: 'Record the reminder' } }];
    }
    if (results.length === 1) {
      const body = results[0].includes('buy milk at 5pm') ? REPLY : `Something failed: ${results[0].slice(0, 200)}`;
      return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.send_telegram '${JSON.stringify({ recipient: String(chat), body })}'`, description: 'Reply' } }];
    }
    return [{ type: 'text', text: 'Replied to the user.' }];
  };
}

/** Both tool calls crossed every pipeline stage, each under one correlation, in the group. */
export function expectPipelineTrail(entries: AuditEntry[], group: string): void {
  for (const topic of ['tool.invoke.echo', 'tool.invoke.send_telegram']) {
    const response = entries.find((e) => e.topic === topic && e.stage === 'response');
    expect(response?.outcome).toBe('ok');
    const trail = entries.filter((e) => e.correlation === response?.correlation);
    expect(trail.map((e) => e.stage)).toEqual(['envelope', 'topic', 'payload', 'authorize', 'route', 'response']);
    expect(trail.every((e) => e.group === group)).toBe(true);
  }
}
