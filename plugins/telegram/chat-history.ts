// What get_telegram_history shows: the latest messages of each of a group's chats, both
// directions, in memory (a restart forgets them), with the label of the bot's messages a
// session sent after reading external content (DESIGN 16).

/** Messages remembered per chat (both directions). */
const HISTORY_PER_CHAT = 200;

export interface HistoryEntry {
  message_id: number;
  from: 'user' | 'bot';
  /** The Telegram user id of a user's message; null for the bot's own. */
  sender: string | null;
  text: string;
  date: string;
  /** The bot's message, sent by a session that had read external content (the core's label). */
  external?: true;
}

export class ChatHistory {
  private readonly chats = new Map<string, HistoryEntry[]>();

  remember(chat: string, entry: HistoryEntry): void {
    let list = this.chats.get(chat);
    if (!list) this.chats.set(chat, (list = []));
    list.push(entry);
    if (list.length > HISTORY_PER_CHAT) list.splice(0, list.length - HISTORY_PER_CHAT);
  }

  /** The newest `limit` (at least one), oldest first. */
  latest(chat: string, limit: number): HistoryEntry[] {
    return (this.chats.get(chat) ?? []).slice(-Math.max(1, limit));
  }

  /** The bot's messages `ids` in `chat` were written after reading external content. */
  labelSent(chat: string, ids: readonly number[]): void {
    for (const entry of this.chats.get(chat) ?? []) if (entry.from === 'bot' && ids.includes(entry.message_id)) entry.external = true;
  }

  forget(chat: string): void {
    this.chats.delete(chat);
  }
}
