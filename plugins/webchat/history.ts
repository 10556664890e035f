// The web chat's conversations: per group, the last `perGroup` messages, kept on disk in
// the plugin's data directory (written atomically, a moment after each change), and
// pushed live to the pages that follow a group. Bounded: groups kept, messages per group,
// open streams, and a stream that stops reading is cut off, not buffered. Each message
// goes out with its id; a page that reconnects with the last id it had gets what came
// after it, so it sees every message once.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { readVersionedJson, versionedJsonText, writeAtomically, type FileRef } from '#sdk';

export interface ChatMessage {
  id: string;
  group: string;
  /** user: the person; agent: the agent's send_webchat; notice: the core (errors, approvals, notices). */
  from: 'user' | 'agent' | 'notice';
  text: string;
  at: string;
  /** A file the agent sent with it (checked and kept by the core; the console serves it). */
  file?: FileRef;
}

const MAX_GROUPS = 100;
const MAX_STREAMS = 16;
const MAX_BUFFERED = 1 << 20;
const SAVE_DELAY_MS = 200;
/** A comment line this often keeps an idle stream open (and finds a page that is gone). */
const KEEPALIVE_MS = 15_000;

/** Version 1 (`{version, groups}`); version 0 was the groups' object alone. */
const HISTORY_FORMAT = {
  migrations: [(json: unknown) => ({ groups: json })],
  read: (json: unknown) => Object.entries(((json as { groups?: unknown } | null)?.groups ?? {}) as Record<string, ChatMessage[]>),
};

export class ChatHistory {
  private readonly byGroup = new Map<string, ChatMessage[]>();
  private readonly streams = new Set<{ res: ServerResponse; group: string }>();
  private saveTimer: NodeJS.Timeout | null = null;
  private readonly keepalive: NodeJS.Timeout;
  private readonly file: string;

  /** `problems` hears of an unreadable file (moved aside; the chat starts empty) and of a failed save (kept in memory). */
  constructor(
    dataDir: string,
    private readonly perGroup: number,
    private readonly problems: { corrupt(movedTo: string): void; saveFailed(err: Error): void },
  ) {
    this.file = join(dataDir, 'history.json');
    this.keepalive = setInterval(() => {
      for (const stream of this.streams) this.write(stream, ': keep-alive\n\n');
    }, KEEPALIVE_MS);
    this.keepalive.unref();
    const saved = readVersionedJson(this.file, HISTORY_FORMAT);
    if (saved.kind === 'moved') problems.corrupt(saved.movedAside);
    for (const [group, list] of saved.kind === 'loaded' ? saved.value : []) if (Array.isArray(list)) this.byGroup.set(group, list.slice(-perGroup));
  }

  list(group: string): ChatMessage[] {
    return this.byGroup.get(group) ?? [];
  }

  add(group: string, from: ChatMessage['from'], text: string, file?: FileRef): ChatMessage {
    const message: ChatMessage = { id: randomUUID(), group, from, text, at: new Date().toISOString(), ...(file ? { file } : {}) };
    let list = this.byGroup.get(group);
    if (!list) {
      if (this.byGroup.size >= MAX_GROUPS) this.byGroup.delete(this.byGroup.keys().next().value as string);
      this.byGroup.set(group, (list = []));
    }
    list.push(message);
    if (list.length > this.perGroup) list.splice(0, list.length - this.perGroup);
    for (const stream of this.streams) if (stream.group === group) this.write(stream, event(message));
    this.scheduleSave();
    return message;
  }

  /**
   * Forgets the group's messages (the person cleared the conversation): open pages get a
   * `cleared` event and empty their view.
   */
  clear(group: string): void {
    this.byGroup.delete(group);
    const cleared = `id: ${randomUUID()}\ndata: ${JSON.stringify({ cleared: true, group })}\n\n`;
    for (const stream of this.streams) if (stream.group === group) this.write(stream, cleared);
    this.scheduleSave();
  }

  /**
   * Follows a group's new messages as server-sent events, first those after the message
   * `since` (the last one the page had) when given; false when too many follow already.
   */
  follow(res: ServerResponse, group: string, since: string | null = null): boolean {
    if (this.streams.size >= MAX_STREAMS) return false;
    const stream = { res, group };
    this.streams.add(stream);
    res.on('close', () => this.streams.delete(stream));
    // Exactly this type: the console's proxy lifts its 10 s request timeout only for it.
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    res.write(': following\n\n');
    // An id no longer kept (or from before a restart): all that is kept; the page skips what it has.
    if (since !== null) {
      const list = this.list(group);
      for (const message of list.slice(list.findIndex((m) => m.id === since) + 1)) res.write(event(message));
    }
    return true;
  }

  private write(stream: { res: ServerResponse; group: string }, text: string): void {
    if (stream.res.writableLength > MAX_BUFFERED) {
      this.streams.delete(stream);
      stream.res.destroy();
    } else {
      stream.res.write(text);
    }
  }

  private scheduleSave(): void {
    if (this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = null;
      this.save();
    }, SAVE_DELAY_MS);
  }

  /** Written whole to a temp file, then renamed: a crash leaves the old file or the new one. */
  save(): void {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = null;
    try {
      writeAtomically(this.file, versionedJsonText(HISTORY_FORMAT.migrations.length, { groups: Object.fromEntries(this.byGroup) }));
    } catch (err) {
      this.problems.saveFailed(err as Error);
    }
  }

  close(): void {
    clearInterval(this.keepalive);
    for (const { res } of this.streams) res.end();
    this.streams.clear();
    this.save();
  }
}

function event(message: ChatMessage): string {
  return `id: ${message.id}\ndata: ${JSON.stringify(message)}\n\n`;
}
