// The Telegram channel: long-polls the Bot API for messages from the chats mapped to
// groups and publishes them as message.inbound; sends what the agent asks, only to the
// chats of the asking group; puts confirmation buttons in front of the owners. A chat
// mapped to no group is never answered by an agent: it gets a pairing code for the owner
// (at most once per PAIRING_REPEAT_MS), and is mapped when the owner approves it.
import pino from 'pino';
import {
  AbortedBeforeActing,
  ServiceError,
  ToolError,
  type ConfirmationStatus,
  type CoreServices,
  type EventEnvelope,
  type JsonObject,
  type PluginConfig,
  type PluginHandler,
  type RequestContext,
  type RequestEnvelope,
  truncate,
} from '#sdk';
import { BotApi, BotApiAborted, BotApiError, type TgCallbackQuery, type TgMessage, type TgUpdate, type TgUser } from './bot-api.js';
import { OffsetStore } from './offset-store.js';
import { PromptLedger, type Prompt } from './prompt-ledger.js';
import { outcomeNote } from './prompt-outcome.js';
import { ChatHistory, type HistoryEntry } from './chat-history.js';
import { describe, initFailure, RateLimited, toolError } from './errors.js';
import { renderPrompt } from './prompt-render.js';
import { splitMessage } from './split.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'telegram' } }, pino.destination(2));

/** 429 handling for one tool call: at most this many retries, and this much waiting in all. */
const MAX_RETRIES = 3;
const RETRY_BUDGET_MS = 20_000;
const TRACKED_PROMPTS = 200;
/** A button carries this many hex digits of the description's hash: the answer binds to what was shown. */
const HASH_PREFIX = 12;
const CALLBACK = /^c:([A-Za-z0-9-]{1,58}):([ads])(?::([0-9a-f]{8,16}))?$/;
/** "Approve + allow 24 h": the same tool with the same arguments in this group asks nobody for a day. */
const STANDING_HOURS = 24;
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

function who(user: TgUser): string {
  return user.username ? `@${user.username}` : user.first_name ?? String(user.id);
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
  /** Open prompts by confirmation id, on disk: closed after a restart too (prompt-ledger.ts). */
  private prompts!: PromptLedger;
  private readonly locks = new Map<string, Promise<void>>();
  /** Prompt edits under way: shutdown waits for them. */
  private readonly closing = new Set<Promise<void>>();

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.settings = parseSettings(config);
    this.api = new BotApi(this.settings.baseUrl, this.settings.token);
    this.store = new OffsetStore(services.dataDir);
    this.prompts = new PromptLedger(services.dataDir, TRACKED_PROMPTS, (err) => log.error({ err: err.message }, 'could not save the open prompts'));
    const moved = this.prompts.load().movedAside;
    if (moved) log.error({ moved_to: moved }, 'the saved open prompts were corrupt; moved aside');

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
    if (tool === 'send_telegram') return this.sendTelegram(envelope.group, String(args.recipient), String(args.body), context?.signal, envelope.external_content === true);
    if (tool === 'get_telegram_history') return this.getHistory(envelope.group, String(args.chat_id), typeof args.limit === 'number' ? args.limit : 20);
    throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
  }

  async handleEvent(envelope: EventEnvelope): Promise<void> {
    // The core said this plugin is ready: at its start, and whenever a core that restarted
    // took it back. Prompts whose request that core does not have are closed now.
    if (envelope.topic === 'plugin.ready' && envelope.payload.plugin === 'telegram') return this.closeEndedPrompts();
    if (envelope.group === null) return;
    if (envelope.topic === 'confirmation.requested') await this.announceConfirmation(envelope.group, envelope.payload);
    else if (envelope.topic === 'confirmation.resolved') await this.settleConfirmation(envelope.payload);
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
    await this.exclusive(chat, () => this.send(chat, text, {}));
  }

  /** The owner approved this chat into `group`: its messages reach that group's agent from now on. */
  private async paired(chat: string, group: string): Promise<void> {
    this.settings.chats.set(chat, group);
    this.pairingOffered.delete(chat);
    log.info({ chat, group }, 'chat paired');
    await this.exclusive(chat, () => this.send(chat, `Connected: this chat now talks to the agent (group "${group}").`, {}));
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    // A stopping core has withdrawn its requests before it asks plugins to shut down, and
    // still answers: their prompts are closed now, not left with live buttons.
    await this.closeEndedPrompts();
    await Promise.all(this.closing);
    this.abort.abort();
    await this.loop?.catch(() => undefined);
    if (this.store) await this.store.save(this.offset).catch((err: unknown) => log.error({ err: String(err) }, 'could not save the update offset'));
  }

  // ---- tools -----------------------------------------------------------------------------

  private chatsOf(group: string): string[] {
    return [...this.settings.chats].filter(([, g]) => g === group).map(([chat]) => chat);
  }

  /** `deadline`: the request's signal, aborted by the core when its time is up. */
  private async sendTelegram(group: string, recipient: string, body: string, deadline?: AbortSignal, external = false): Promise<unknown> {
    const chat = recipient.trim();
    if (this.settings.chats.get(chat) !== group) throw new ToolError({ message: 'recipient is not a chat of this group', retriable: false });
    const chunks = splitMessage(body);
    if (chunks.length === 0) throw new ToolError({ message: 'body is empty', retriable: false });
    // One message at a time per chat, so the parts of two long messages never interleave.
    return this.exclusive(chat, async () => {
      const budget = { waitedMs: 0 };
      const ids: number[] = [];
      const signal = deadline ? AbortSignal.any([this.abort.signal, deadline]) : this.abort.signal;
      // A sendMessage cut off in flight may have reached Telegram: only before any did, nothing happened.
      const progress = { inFlight: false };
      if (deadline?.aborted) throw new AbortedBeforeActing();
      try {
        for (const chunk of chunks) {
          try {
            ids.push((await this.send(chat, chunk, {}, budget, signal, progress)).message_id);
          } catch (err) {
            if (deadline?.aborted && ids.length === 0 && !progress.inFlight) throw new AbortedBeforeActing();
            throw toolError(err, ids.length, chunks.length);
          }
        }
      } finally {
        // Whatever parts went out keep the label (get_telegram_history shows them).
        if (external) this.history.labelSent(chat, ids);
      }
      return { message_ids: ids, chunks: chunks.length };
    });
  }

  private getHistory(group: string, chatId: string, limit: number): unknown {
    const chat = chatId.trim();
    if (this.settings.chats.get(chat) !== group) throw new ToolError({ message: 'chat_id is not a chat of this group', retriable: false });
    const messages = this.history.latest(chat, limit);
    // What a labelled session sent: the session that reads it back is labelled too (the core reads this).
    return { chat_id: chat, messages, ...(messages.some((m) => m.external) ? { external_content: true } : {}) };
  }

  private async exclusive<T>(chat: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(chat) ?? Promise.resolve();
    const run = previous.then(fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(chat, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(chat) === tail) this.locks.delete(chat);
    }
  }

  /** sendMessage, waiting out 429s within the budget; remembers what was sent. */
  private async send(chat: string, text: string, extra: JsonObject, budget = { waitedMs: 0 }, signal = this.abort.signal, progress = { inFlight: false }): Promise<TgMessage> {
    for (let attempt = 0; ; attempt++) {
      try {
        progress.inFlight = true;
        const message = await this.api.call<TgMessage>('sendMessage', { chat_id: chat, text, ...extra }, { signal });
        progress.inFlight = false;
        this.remember(chat, { message_id: message.message_id, from: 'bot', sender: null, text, date: new Date().toISOString() });
        return message;
      } catch (err) {
        // Telegram answered (a refusal): that message was not sent.
        if (err instanceof BotApiError) progress.inFlight = false;
        if (!(err instanceof BotApiError) || err.errorCode !== 429) throw err;
        const retryAfter = Math.max(1, Math.ceil(err.retryAfter ?? 1));
        if (attempt >= MAX_RETRIES || budget.waitedMs + retryAfter * 1000 > RETRY_BUDGET_MS) throw new RateLimited(retryAfter);
        log.info({ chat, retry_after: retryAfter }, 'rate limited by Telegram; waiting');
        budget.waitedMs += retryAfter * 1000;
        await sleep(retryAfter * 1000, signal);
        if (signal.aborted) throw new BotApiAborted('sendMessage');
      }
    }
  }

  /** Only a group's chats have a history (not one per stranger). */
  private remember(chat: string, entry: HistoryEntry): void {
    if (this.settings.chats.has(chat)) this.history.remember(chat, entry);
  }

  // ---- events from the core ---------------------------------------------------------------

  private async announceConfirmation(group: string, payload: JsonObject): Promise<void> {
    const id = String(payload.id ?? '');
    const tool = String(payload.tool ?? 'a tool');
    if (!id) return;
    const expires = Date.parse(String(payload.expires_at ?? ''));
    const minutes = Number.isFinite(expires) ? Math.max(1, Math.round((expires - Date.now()) / 60_000)) : null;
    const { before, text, hash } = renderPrompt(tool, group, payload.description, minutes);
    const data = (verdict: string): string => `c:${id}:${verdict}${hash ? `:${hash.slice(0, HASH_PREFIX)}` : ''}`;
    const buttons = Buffer.byteLength(data('a')) <= 64 && CALLBACK.test(data('a'));
    const extra: JsonObject = buttons
      ? {
          reply_markup: {
            inline_keyboard: [
              [{ text: 'Approve', callback_data: data('a') }, { text: 'Deny', callback_data: data('d') }],
              [{ text: `Approve + allow exactly this, once an hour, for ${STANDING_HOURS} h`, callback_data: data('s') }],
            ],
          },
        }
      : {};
    const sent: Prompt[] = [];
    for (const chat of this.chatsOf(group)) {
      try {
        const message = await this.exclusive(chat, async () => {
          const budget = { waitedMs: 0 };
          for (const part of before) await this.send(chat, part, {}, budget);
          return this.send(chat, buttons ? text : `${text}\n(answer on the dashboard)`, extra, budget);
        });
        sent.push({ chat, message_id: message.message_id, text });
      } catch (err) {
        log.error({ chat, err: describe(err) }, 'could not send a confirmation request');
      }
    }
    if (sent.length > 0) this.prompts.add(id, sent);
  }

  /** Every remembered prompt whose request is no longer pending is edited to say how it ended. */
  private async closeEndedPrompts(): Promise<void> {
    for (const id of this.prompts.ids()) {
      let note: string | null;
      try {
        note = outcomeNote(await this.services.confirmationStatus(id));
      } catch (err) {
        log.warn({ err: describe(err) }, 'could not ask the core about open prompts; they are checked when it is back');
        return;
      }
      if (note !== null) await this.closePrompts(this.prompts.take(id) ?? [], note);
    }
  }

  /** Edits prompts to end with `note` (buttons gone). Not cut short by shutdown, which waits for it. */
  private closePrompts(prompts: Prompt[], note: string): Promise<void> {
    const closing = (async () => {
      for (const prompt of prompts) {
        await this.api
          .call('editMessageText', { chat_id: prompt.chat, message_id: prompt.message_id, text: `${prompt.text}\n\n${note}` })
          .catch((err: unknown) => log.warn({ err: describe(err) }, 'could not update a confirmation message'));
      }
    })();
    this.closing.add(closing);
    return closing.finally(() => this.closing.delete(closing));
  }

  /** Any outcome not pressed here (timed out, withdrawn, answered elsewhere) is edited into the prompt. */
  private async settleConfirmation(payload: JsonObject): Promise<void> {
    const id = String(payload.id ?? '');
    const by = String(payload.by ?? 'unknown');
    if (by.startsWith('telegram:')) return; // a press here: onCallback edits the prompts
    const prompts = this.prompts.take(id);
    if (!prompts) return;
    const decision = String(payload.decision) as Extract<ConfirmationStatus, { state: 'ended' }>['decision'];
    await this.closePrompts(prompts, outcomeNote({ state: 'ended', group: '', decision, by }) ?? '');
  }

  private async apologize(group: string, payload: JsonObject): Promise<void> {
    const reason = typeof payload.reason === 'string' ? payload.reason : typeof payload.exit_code === 'number' ? `exit code ${payload.exit_code}` : null;
    await this.notify(group, `Sorry, something went wrong while handling that${reason ? ` (${truncate(reason, 200)})` : ''}`);
  }

  /** A notice from Carapace itself (errors, paused tasks) to every chat of the group. */
  private async notify(group: string, text: string): Promise<void> {
    for (const chat of this.chatsOf(group)) {
      try {
        await this.exclusive(chat, () => this.send(chat, text, {}));
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
    else if (update.callback_query) await this.onCallback(update.callback_query);
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

  private async onCallback(query: TgCallbackQuery): Promise<void> {
    const answer = (text: string): Promise<void> =>
      this.api
        .call('answerCallbackQuery', { callback_query_id: query.id, text }, { signal: this.abort.signal })
        .then(() => undefined)
        .catch((err: unknown) => log.warn({ err: describe(err) }, 'answerCallbackQuery failed'));
    const match = CALLBACK.exec(query.data ?? '');
    const chat = query.message ? String(query.message.chat.id) : null;
    const group = chat === null ? undefined : this.settings.chats.get(chat);
    if (!match || !group) return answer('Not allowed');
    const user = String(query.from?.id);
    if (!this.settings.owners.has(user)) {
      log.warn({ chat, from: user }, 'confirmation button pressed by someone who is not an owner');
      return answer('Not allowed');
    }
    const [, id, verdict, hash] = match;
    const approve = verdict !== 'd';
    const allowHours = verdict === 's' ? STANDING_HOURS : undefined;
    let outcome: 'resolved' | 'gone' | 'stale' | 'failed' | 'elsewhere';
    try {
      const result = await this.services.resolveConfirmation(id, approve, user, group, allowHours, hash);
      outcome = result === 'stale' ? 'stale' : result ? 'resolved' : 'gone';
    } catch (err) {
      outcome = 'failed';
      log.error({ err: describe(err) }, 'resolveConfirmation failed');
    }
    const decision = allowHours ? `Approved, and allowed with these exact arguments for ${STANDING_HOURS} h` : approve ? 'Approved' : 'Denied';
    // Nothing was pending: say how the request ended, as the core knows it (answered,
    // expired, withdrawn; or gone with a core that restarted), not a guess.
    const status = outcome === 'gone' ? await this.services.confirmationStatus(id).catch(() => null) : null;
    // Still pending, yet not this chat's group to answer (a button pressed in another group's chat).
    if (status?.state === 'pending') outcome = 'elsewhere';
    const ended = status ? outcomeNote(status) : null;
    await answer(
      outcome === 'elsewhere' ? 'Not allowed'
      : outcome === 'resolved' ? decision
      : outcome === 'gone' ? ended ?? 'This request is no longer waiting: nothing was decided'
      : outcome === 'stale' ? 'This button is for other arguments than the request waiting: nothing was decided'
      : 'Could not reach Carapace; try again',
    );
    // A stale or failed press decides nothing: the real prompt keeps its buttons.
    if (outcome === 'failed' || outcome === 'stale' || outcome === 'elsewhere') return;
    const note = outcome === 'resolved' ? `${decision} by ${who(query.from)}` : ended ?? 'No longer waiting';
    // Take the buttons away: everywhere the question was asked once it is decided (or known
    // to have ended), otherwise only under the pressed message (a forged press must not touch the real prompt).
    const pressed = query.message ? [{ chat: chat!, message_id: query.message.message_id, text: query.message.text ?? '' }] : [];
    const everywhere = outcome === 'resolved' || ended !== null ? this.prompts.take(id) : undefined;
    await this.closePrompts(everywhere ?? pressed, note);
  }
}

