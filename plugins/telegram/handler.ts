// The Telegram channel: long-polls the Bot API for messages from the chats mapped to
// groups and publishes them as message.inbound; sends what the agent asks, only to the
// chats of the asking group (outbox.ts), files too; puts confirmation buttons in front of
// the owners (confirmation-prompts.ts). A chat mapped to no group is never answered by an
// agent: it gets a pairing code for the owner (at most once per PAIRING_REPEAT_MS), and is
// mapped when the owner approves it.
import pino from 'pino';
import {
  AbortedBeforeActing,
  ServiceError,
  ToolError,
  type CoreServices,
  type EventEnvelope,
  type FileRef,
  type JsonObject,
  type PluginConfig,
  type PluginHandler,
  type RequestContext,
  type RequestEnvelope,
  truncate,
} from '#sdk';
import { BotApi, BotApiError, type TgMessage, type TgUpdate, type TgUser, type UploadFile } from './bot-api.js';
import { OffsetStore } from './offset-store.js';
import { ConfirmationPrompts } from './confirmation-prompts.js';
import { PromptLedger } from './prompt-ledger.js';
import { ChatHistory, type HistoryEntry } from './chat-history.js';
import { describe, initFailure, toolError } from './errors.js';
import { CAPTION_LIMIT, Outbox, sleep, type RetryBudget, type SendProgress } from './outbox.js';
import { splitMessage } from './split.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'telegram' } }, pino.destination(2));

const TRACKED_PROMPTS = 200;
/** An unknown chat hears its pairing code at most this often, whatever it sends. */
const PAIRING_REPEAT_MS = 10 * 60_000;
/** Unknown chats remembered for that limit (a flood of new chats forgets the oldest). */
const PAIRING_CHATS = 1000;

interface Settings {
  token: string;
  baseUrl: string;
  /** chat id → group */
  chats: Map<string, string>;
  owners: Set<string>;
  pollTimeoutS: number;
}

function parseSettings(config: PluginConfig): Settings {
  // The host has validated the config against the manifest's config_schema (defaults applied).
  const chats = new Map<string, string>(Object.entries((config.chats ?? {}) as Record<string, string>));
  const owners = new Set(((config.owners ?? []) as (string | number)[]).map((o) => String(o)));
  return {
    token: String(config.bot_token),
    baseUrl: String(config.api_base_url ?? 'https://api.telegram.org'),
    chats,
    owners,
    pollTimeoutS: typeof config.poll_timeout_s === 'number' ? config.poll_timeout_s : 25,
  };
}

export default class TelegramChannel implements PluginHandler {
  private settings!: Settings;
  private services!: CoreServices;
  private api!: BotApi;
  private store!: OffsetStore;
  private offset = 0;
  private loop: Promise<void> | null = null;
  private stopping = false;
  private readonly abort = new AbortController();
  private readonly history = new ChatHistory();
  private confirmations!: ConfirmationPrompts;
  private outbox!: Outbox;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.settings = parseSettings(config);
    this.api = new BotApi(this.settings.baseUrl, this.settings.token);
    this.outbox = new Outbox(this.api, (chat, entry) => this.remember(chat, entry), this.abort.signal);
    this.store = new OffsetStore(services.dataDir);
    // Open prompts by confirmation id, on disk: closed after a restart too (prompt-ledger.ts).
    const ledger = new PromptLedger(services.dataDir, TRACKED_PROMPTS, (err) => log.error({ err: err.message }, 'could not save the open prompts'));
    const moved = ledger.load().movedAside;
    if (moved) log.error({ moved_to: moved }, 'the saved open prompts were corrupt; moved aside');
    const { chats, owners } = this.settings;
    this.confirmations = new ConfirmationPrompts({ api: this.api, outbox: this.outbox, services, ledger, chats, owners, chatsOf: (group) => this.chatsOf(group), stopping: this.abort.signal });

    let me: TgUser;
    try {
      me = await this.api.call<TgUser>('getMe', {}, { timeoutMs: 10_000 });
    } catch (err) {
      throw initFailure(err);
    }
    const saved = await this.store.load();
    if (typeof saved === 'number') {
      this.offset = saved;
    } else {
      log.error({ moved_to: saved.movedAside }, 'the saved update offset was corrupt; moved aside');
      try {
        await this.skipBacklog();
      } catch (err) {
        throw initFailure(err);
      }
    }
    if (this.settings.chats.size === 0) log.warn('no chats configured: every incoming message will be ignored');
    if (this.settings.owners.size === 0) log.warn('no owners configured: confirmation buttons cannot be answered from Telegram');
    log.info({ bot: me.username ?? me.id, offset: this.offset, chats: this.settings.chats.size }, 'connected; polling for updates');
    this.loop = this.poll();
  }

  async handleRequest(envelope: RequestEnvelope, context?: RequestContext): Promise<unknown> {
    const args = envelope.payload.arguments;
    const tool = envelope.topic.slice('tool.invoke.'.length);
    // `file`, if any, is the core's FileRef (file_arguments in the manifest), never the agent's path.
    if (tool === 'send_telegram') return this.sendTelegram(envelope.group, String(args.recipient), String(args.body), args.file as FileRef | undefined, context?.signal, envelope.external_content === true);
    if (tool === 'get_telegram_history') return this.getHistory(envelope.group, String(args.chat_id), typeof args.limit === 'number' ? args.limit : 20);
    throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
  }

  async handleEvent(envelope: EventEnvelope): Promise<void> {
    // The core said this plugin is ready: at its start, and whenever a core that restarted
    // took it back. Prompts whose request that core does not have are closed now.
    if (envelope.topic === 'plugin.ready' && envelope.payload.plugin === 'telegram') return this.confirmations.closeEnded();
    if (envelope.group === null) return;
    if (envelope.topic === 'confirmation.requested') await this.confirmations.announce(envelope.group, envelope.payload);
    else if (envelope.topic === 'confirmation.resolved') await this.confirmations.settle(envelope.payload);
    else if (envelope.topic === 'agent.error') await this.apologize(envelope.group, envelope.payload);
    else if (envelope.topic === 'user.notify' && typeof envelope.payload.text === 'string') await this.notify(envelope.group, envelope.payload.text);
    else if (envelope.topic === 'pairing.approved' && envelope.payload.plugin === 'telegram') await this.paired(String(envelope.payload.chat), envelope.group);
    else if (envelope.topic === 'conversation.cleared') this.forgetGroup(envelope.group);
  }

  /** The person cleared the group's conversation ("/forget" here or elsewhere): get_telegram_history forgets its chats too. */
  private forgetGroup(group: string): void {
    for (const [chat, mapped] of this.settings.chats) if (mapped === group) this.history.forget(chat);
  }

  // ---- pairing -----------------------------------------------------------------------------

  private readonly pairingOffered = new Map<string, number>();

  private async offerPairing(chat: string, message: TgMessage): Promise<void> {
    const last = this.pairingOffered.get(chat);
    if (last !== undefined && Date.now() - last < PAIRING_REPEAT_MS) return;
    this.pairingOffered.delete(chat);
    if (this.pairingOffered.size >= PAIRING_CHATS) this.pairingOffered.delete(this.pairingOffered.keys().next().value as string);
    this.pairingOffered.set(chat, Date.now());
    const name = message.chat.title ?? ([message.from?.first_name, message.from?.username ? `@${message.from.username}` : undefined].filter(Boolean).join(' ') || undefined);
    const answer = await this.services.requestPairing(chat, { name, text: message.text });
    if (!answer) return; // refused by the owner lately, or not now: say nothing
    const text = `This chat is not connected to an agent yet. To connect it, the owner approves the code ${answer.code} in the Carapace console (Groups & channels). The code is valid for an hour.`;
    await this.outbox.exclusive(chat, () => this.outbox.send(chat, text, {}));
  }

  /** The owner approved this chat into `group`: its messages reach that group's agent from now on. */
  private async paired(chat: string, group: string): Promise<void> {
    this.settings.chats.set(chat, group);
    this.pairingOffered.delete(chat);
    log.info({ chat, group }, 'chat paired');
    await this.outbox.exclusive(chat, () => this.outbox.send(chat, `Connected: this chat now talks to the agent (group "${group}").`, {}));
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    // A stopping core has withdrawn its requests before it asks plugins to shut down, and
    // still answers: their prompts are closed now, not left with live buttons.
    await this.confirmations.closeEnded();
    await this.confirmations.settled();
    this.abort.abort();
    await this.loop?.catch(() => undefined);
    if (this.store) await this.store.save(this.offset).catch((err: unknown) => log.error({ err: String(err) }, 'could not save the update offset'));
  }

  // ---- tools -----------------------------------------------------------------------------

  private chatsOf(group: string): string[] {
    return [...this.settings.chats].filter(([, g]) => g === group).map(([chat]) => chat);
  }

  /**
   * `deadline`: the request's signal, aborted by the core when its time is up. A file goes
   * with the text as its caption when the text fits one, else after the text's parts.
   */
  private async sendTelegram(group: string, recipient: string, body: string, file: FileRef | undefined, deadline?: AbortSignal, external = false): Promise<unknown> {
    const chat = recipient.trim();
    if (this.settings.chats.get(chat) !== group) throw new ToolError({ message: 'recipient is not a chat of this group', retriable: false });
    const chunks = splitMessage(body);
    if (chunks.length === 0) throw new ToolError({ message: 'body is empty', retriable: false });
    const upload = file ? await this.fileOf(file) : null;
    const captioned = upload !== null && body.length <= CAPTION_LIMIT;
    const texts = captioned ? [] : chunks;
    const total = texts.length + (upload ? 1 : 0);
    // One message at a time per chat, so the parts of two long messages never interleave.
    return this.outbox.exclusive(chat, async () => {
      const budget: RetryBudget = { waitedMs: 0 };
      const ids: number[] = [];
      const signal = deadline ? AbortSignal.any([this.abort.signal, deadline]) : this.abort.signal;
      // A message cut off in flight may have reached Telegram: only before any did, nothing happened.
      const progress: SendProgress = { inFlight: false };
      if (deadline?.aborted) throw new AbortedBeforeActing();
      const part = async (send: () => Promise<TgMessage>): Promise<void> => {
        try {
          ids.push((await send()).message_id);
        } catch (err) {
          if (deadline?.aborted && ids.length === 0 && !progress.inFlight) throw new AbortedBeforeActing();
          throw toolError(err, ids.length, total);
        }
      };
      try {
        for (const chunk of texts) await part(() => this.outbox.send(chat, chunk, {}, budget, signal, progress));
        if (upload) await part(() => this.outbox.sendFile(chat, upload, captioned ? body : '', budget, signal, progress));
      } finally {
        // Whatever parts went out keep the label (get_telegram_history shows them).
        if (external) this.history.labelSent(chat, ids);
      }
      return { message_ids: ids, chunks: total, ...(file ? { file: { name: file.name, size: file.size, type: file.type } } : {}) };
    });
  }

  /** The bytes of the file the core attached (its FileRef), before anything is sent. */
  private async fileOf(file: FileRef): Promise<UploadFile> {
    try {
      return { name: file.name, type: file.type, bytes: await this.services.readFile(file) };
    } catch (err) {
      throw new ToolError({ message: `the file could not be had from the core (${err instanceof Error ? err.message : String(err)}); nothing was sent`, retriable: true });
    }
  }

  private getHistory(group: string, chatId: string, limit: number): unknown {
    const chat = chatId.trim();
    if (this.settings.chats.get(chat) !== group) throw new ToolError({ message: 'chat_id is not a chat of this group', retriable: false });
    const messages = this.history.latest(chat, limit);
    // What a labelled session sent: the session that reads it back is labelled too (the core reads this).
    return { chat_id: chat, messages, ...(messages.some((m) => m.external) ? { external_content: true } : {}) };
  }

  /** Only a group's chats have a history (not one per stranger). */
  private remember(chat: string, entry: HistoryEntry): void {
    if (this.settings.chats.has(chat)) this.history.remember(chat, entry);
  }

  // ---- events from the core ---------------------------------------------------------------

  private async apologize(group: string, payload: JsonObject): Promise<void> {
    const reason = typeof payload.reason === 'string' ? payload.reason : typeof payload.exit_code === 'number' ? `exit code ${payload.exit_code}` : null;
    await this.notify(group, `Sorry, something went wrong while handling that${reason ? ` (${truncate(reason, 200)})` : ''}`);
  }

  /** A notice from Carapace itself (errors, paused tasks) to every chat of the group. */
  private async notify(group: string, text: string): Promise<void> {
    for (const chat of this.chatsOf(group)) {
      try {
        await this.outbox.exclusive(chat, () => this.outbox.send(chat, text, {}));
      } catch (err) {
        log.error({ chat, err: describe(err) }, 'could not send a notice');
      }
    }
  }

  // ---- updates from Telegram -------------------------------------------------------------

  private async poll(): Promise<void> {
    let backoffMs = 1000;
    while (!this.stopping) {
      let updates: TgUpdate[];
      try {
        updates = await this.api.call<TgUpdate[]>(
          'getUpdates',
          { offset: this.offset, timeout: this.settings.pollTimeoutS, allowed_updates: ['message', 'callback_query'] },
          { signal: this.abort.signal, timeoutMs: (this.settings.pollTimeoutS + 15) * 1000 },
        );
        backoffMs = 1000;
      } catch (err) {
        if (this.stopping) break;
        let waitMs = backoffMs;
        if (err instanceof BotApiError && err.errorCode === 429) waitMs = Math.max(1, err.retryAfter ?? 1) * 1000;
        else if (err instanceof BotApiError && err.errorCode === 409) log.error('getUpdates conflict: another instance polls this bot, or a webhook is set');
        else if (err instanceof BotApiError && err.errorCode === 401) log.error('Telegram no longer accepts the bot token');
        else log.warn({ err: describe(err), retry_in_ms: waitMs }, 'getUpdates failed');
        backoffMs = Math.min(backoffMs * 2, 30_000);
        await sleep(waitMs, this.abort.signal);
        continue;
      }
      if (!Array.isArray(updates) || updates.length === 0) continue;
      for (const update of updates) {
        if (typeof update?.update_id !== 'number') continue;
        if (update.update_id < this.offset) continue; // already handled (Telegram should not resend it)
        try {
          await this.handleUpdate(update);
        } catch (err) {
          // Stopping before the core confirmed it: it stays at Telegram for the next run.
          if (err instanceof ServiceError && err.code === 'UNAVAILABLE') return;
          log.error({ update_id: update.update_id, err: describe(err) }, 'update could not be handled');
        }
        this.offset = update.update_id + 1;
        // After each update, not each batch: a crash replays at most the one update that
        // was being handled, and the core recognises its message by the update's key.
        await this.store.save(this.offset).catch((err: unknown) => log.error({ err: String(err) }, 'could not save the update offset'));
      }
    }
  }

  /**
   * The saved offset was unreadable: replaying everything Telegram still holds (up to
   * 24 h) would answer old messages again, so skip what is waiting, and say how much.
   */
  private async skipBacklog(): Promise<void> {
    const last = await this.api.call<TgUpdate[]>('getUpdates', { offset: -1, timeout: 0 }, { timeoutMs: 15_000 });
    const id = Array.isArray(last) ? last[0]?.update_id : undefined;
    if (typeof id === 'number') this.offset = id + 1;
    await this.store.save(this.offset);
    log.error({ offset: this.offset }, 'the saved update offset was corrupt: updates waiting at Telegram were skipped, not replayed');
  }

  private async handleUpdate(update: TgUpdate): Promise<void> {
    if (update.message) await this.onMessage(update.message, update.update_id);
    else if (update.callback_query) await this.confirmations.onCallback(update.callback_query);
  }

  private async onMessage(message: TgMessage, updateId: number): Promise<void> {
    const chat = String(message.chat?.id);
    const group = this.settings.chats.get(chat);
    if (message.from?.is_bot) return;
    if (!group) {
      // The chat id (never the content) helps the operator map a new chat.
      log.info({ chat }, 'message from a chat that is not mapped to a group: no agent answers; pairing offered');
      void this.offerPairing(chat, message).catch((err: unknown) => log.warn({ chat, err: describe(err) }, 'could not offer pairing'));
      return;
    }
    if (typeof message.text !== 'string') {
      log.info({ chat }, 'non-text message ignored');
      return;
    }
    this.remember(chat, {
      message_id: message.message_id,
      from: 'user',
      sender: message.from ? String(message.from.id) : null,
      text: message.text,
      date: new Date((message.date ?? Date.now() / 1000) * 1000).toISOString(),
    });
    await this.services.publish('message.inbound', group, {
      channel: 'telegram',
      sender: chat,
      content_type: 'text',
      body: message.text,
      metadata: { reply_to: message.message_id, from: message.from?.id ?? null, attachments: [] },
    }, { key: `update ${updateId}` });
  }

}

