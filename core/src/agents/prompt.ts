// What an event asks of the agent, as the prompt Claude Code receives.
import type { EventEnvelope } from '../protocol/envelope.js';
import { emailPrompt } from './email-prompt.js';

export function promptFor(event: EventEnvelope): string | null {
  const p = event.payload as Record<string, unknown>;
  // External content never reaches the agent as plain prompt text (email-prompt.ts).
  if (event.topic === 'message.inbound' && p.content_type === 'email') return typeof p.body === 'string' ? emailPrompt(p) : null;
  if (event.topic === 'message.inbound' && typeof p.body === 'string') {
    const channel = typeof p.channel === 'string' ? p.channel : event.source;
    const sender = typeof p.sender === 'string' ? p.sender : 'unknown';
    return [
      `A message arrived on ${channel} from ${sender}.`,
      `Answer by calling the ${channel} send tool with recipient "${sender}" (see your skills).`,
      '',
      'Message:',
      p.body,
    ].join('\n');
  }
  if (event.topic === 'task.triggered' && typeof p.prompt === 'string') {
    return `Scheduled task ${typeof p.task_id === 'string' ? p.task_id : ''} is due.\n\n${p.prompt}`;
  }
  return null;
}
