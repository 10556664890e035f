// Keeps each group's conversation as the person saw it (conversation-store.ts) from what
// only the core knows for sure: a person's message it accepted from a channel plugin
// (`message.inbound`), and a reply a channel's send tool reported delivered (the core's
// `replied`). Gives a new session the recent part of it (earlier-conversation.ts), and
// lets a person clear it: the console, or "/forget" (or "/new") in their own message on any
// of the group's chat channels. A clear is audited, said on the group's channels, and ends
// the group's agent once its current turn is over, so that nothing of the old conversation
// goes on in it. Each message keeps its origin (DESIGN 16): a mail is external, a reply
// written after reading external content is derived, and the brief shows them as such.
import { randomBytes } from 'node:crypto';
import type { ConversationSettings } from '../config.js';
import type { Core, Reply } from '../core.js';
import { carriesUntrustedInput, isPersonsChatMessage } from '../pipeline/untrusted-input.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import type { ConversationMessage, ConversationStore } from './conversation-store.js';
import { renderEarlierConversation, type Brief } from './earlier-conversation.js';

/** "/forget", "/new", and Telegram's "/forget@some_bot" in group chats. */
const FORGET = /^\/(forget|new)(@[A-Za-z0-9_]{1,64})?$/i;

export function isForgetCommand(body: unknown): boolean {
  return typeof body === 'string' && FORGET.test(body.trim());
}

export function clearedNotice(count: number, by: 'channel' | 'console'): string {
  const what = count === 0 ? 'There was no earlier conversation to clear' : `The earlier conversation (${count} message${count === 1 ? '' : 's'}) was cleared${by === 'console' ? ' from the console' : ''}`;
  return `${what}: the agent starts afresh with your next message. Stored memories stay (see Memory in the console).`;
}

export class ConversationKeeper {
  /**
   * `endAgent` ends the group's agent once its current turn is over (the agent manager's
   * forget): the warm session holds the old conversation too.
   */
  constructor(
    private readonly core: Core,
    private readonly store: ConversationStore,
    private readonly settings: ConversationSettings,
    private readonly endAgent: (group: string) => Promise<void>,
  ) {
    core.on('replied', (reply) => this.onReplied(reply));
  }

  /**
   * An event the core accepted. A message is kept; "/forget" in a person's own chat message
   * clears the group's conversation instead and returns true: it is the person's word to
   * Carapace, not to the agent. In a mail it is only the mail's text.
   */
  take(event: EventEnvelope): boolean {
    // Only groups agents run for (the running configuration: pairing adds to it); the rest are dropped by the agent manager.
    if (event.topic !== 'message.inbound' || event.group === null || !Object.hasOwn(this.core.config.groups, event.group)) return false;
    const p = event.payload;
    if (isPersonsChatMessage(event) && isForgetCommand(p.body)) {
      const sender = typeof p.sender === 'string' ? p.sender : 'unknown';
      this.clear(event.group, `${event.source}:${sender}`, 'channel');
      return true;
    }
    if (typeof p.body !== 'string') return false;
    this.store.add({
      group: event.group,
      direction: 'in',
      channel: typeof p.channel === 'string' ? p.channel : event.source,
      party: typeof p.sender === 'string' ? p.sender : 'unknown',
      text: p.body,
      origin: carriesUntrustedInput(event) ? 'external' : 'person',
      event: event.id,
    });
    return false;
  }

  private onReplied(reply: Reply): void {
    const { body, recipient, file } = reply.arguments as { body?: unknown; recipient?: unknown; file?: { name?: unknown } };
    if (typeof body !== 'string') return;
    const attached = typeof file?.name === 'string' ? ` [file: ${file.name}]` : '';
    const party = typeof recipient === 'string' ? recipient : reply.to?.length ? reply.to.join(', ') : 'unknown';
    const origin = this.core.sessions.get(reply.session)?.untrustedInput ? 'derived' : 'person';
    this.store.add({ group: reply.group, direction: 'out', channel: reply.plugin, party, text: body + attached, origin });
  }

  /** The group's kept conversation, oldest first (the console). */
  list(group: string): ConversationMessage[] {
    return this.store.list(group);
  }

  /** Since when messages are kept (Unix ms). */
  keptSince(): number {
    return this.store.keptSince();
  }

  /**
   * Clears the group's conversation: audited, told on its channels, its agent ended once
   * its turn is over (not waited for: a turn may run for minutes). How many messages went.
   */
  clear(group: string, by: string, via: 'channel' | 'console'): number {
    const count = this.store.clear(group);
    this.core.audit.record({ group, session: null, source: by, topic: null, correlation: null, stage: 'agent', outcome: 'ok', reason: `conversation cleared by ${by} (${count} message${count === 1 ? '' : 's'})` });
    // The web chat and Telegram drop their own copies; then every channel of the group hears it.
    this.core.publish('conversation.cleared', group, { by, messages: count });
    this.core.publish('user.notify', group, { text: clearedNotice(count, via) });
    void this.endAgent(group).catch(() => undefined);
    return count;
  }

  /**
   * What a new session's first prompt starts with: the latest messages before the one that
   * started it (`cause`), within brief_messages and brief_chars, fenced with a fresh id;
   * `labelled` when it shows text from outside or derived from it.
   */
  brief(group: string, cause: string | null): Brief {
    const { brief_messages, brief_chars } = this.settings;
    if (brief_messages === 0 || brief_chars === 0) return { text: '', labelled: false };
    const earlier = this.store.before(group, cause, brief_messages);
    return renderEarlierConversation(earlier, { messages: brief_messages, chars: brief_chars }, randomBytes(9).toString('hex'));
  }
}
