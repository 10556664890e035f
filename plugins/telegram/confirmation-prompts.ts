// Confirmation prompts in Telegram: a high-risk call waiting for a person is put in front
// of every chat of its group with Approve / Deny buttons (each carrying a prefix of the
// description's hash, so an answer binds to what was shown); only an owner's press counts;
// every prompt is edited to say how its request ended, here or elsewhere, after a restart
// too (prompt-ledger.ts).
import pino from 'pino';
import type { ConfirmationStatus, CoreServices, JsonObject } from '#sdk';
import type { BotApi, TgCallbackQuery, TgUser } from './bot-api.js';
import { describe } from './errors.js';
import type { Outbox } from './outbox.js';
import type { Prompt, PromptLedger } from './prompt-ledger.js';
import { outcomeNote } from './prompt-outcome.js';
import { renderPrompt } from './prompt-render.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'telegram' } }, pino.destination(2));

/** A button carries this many hex digits of the description's hash: the answer binds to what was shown. */
const HASH_PREFIX = 12;
const CALLBACK = /^c:([A-Za-z0-9-]{1,58}):([ads])(?::([0-9a-f]{8,16}))?$/;
/** "Approve + allow 24 h": the same tool with the same arguments in this group asks nobody for a day. */
const STANDING_HOURS = 24;

function who(user: TgUser): string {
  return user.username ? `@${user.username}` : user.first_name ?? String(user.id);
}

export interface PromptDeps {
  api: BotApi;
  outbox: Outbox;
  services: CoreServices;
  ledger: PromptLedger;
  /** chat id → group */
  chats: Map<string, string>;
  owners: Set<string>;
  chatsOf(group: string): string[];
  stopping: AbortSignal;
}

export class ConfirmationPrompts {
  /** Prompt edits under way: shutdown waits for them. */
  private readonly closing = new Set<Promise<void>>();

  constructor(private readonly deps: PromptDeps) {}

  /** Resolves once the prompt edits under way are done. */
  async settled(): Promise<void> {
    await Promise.all(this.closing);
  }

  async announce(group: string, payload: JsonObject): Promise<void> {
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
    for (const chat of this.deps.chatsOf(group)) {
      try {
        const message = await this.deps.outbox.exclusive(chat, async () => {
          const budget = { waitedMs: 0 };
          for (const part of before) await this.deps.outbox.send(chat, part, {}, budget);
          return this.deps.outbox.send(chat, buttons ? text : `${text}\n(answer on the dashboard)`, extra, budget);
        });
        sent.push({ chat, message_id: message.message_id, text });
      } catch (err) {
        log.error({ chat, err: describe(err) }, 'could not send a confirmation request');
      }
    }
    if (sent.length > 0) this.deps.ledger.add(id, sent);
  }

  /** Every remembered prompt whose request is no longer pending is edited to say how it ended. */
  async closeEnded(): Promise<void> {
    for (const id of this.deps.ledger.ids()) {
      let note: string | null;
      try {
        note = outcomeNote(await this.deps.services.confirmationStatus(id));
      } catch (err) {
        log.warn({ err: describe(err) }, 'could not ask the core about open prompts; they are checked when it is back');
        return;
      }
      if (note !== null) await this.closePrompts(this.deps.ledger.take(id) ?? [], note);
    }
  }

  /** Edits prompts to end with `note` (buttons gone). Not cut short by shutdown, which waits for it. */
  private closePrompts(prompts: Prompt[], note: string): Promise<void> {
    const closing = (async () => {
      for (const prompt of prompts) {
        await this.deps.api
          .call('editMessageText', { chat_id: prompt.chat, message_id: prompt.message_id, text: `${prompt.text}\n\n${note}` })
          .catch((err: unknown) => log.warn({ err: describe(err) }, 'could not update a confirmation message'));
      }
    })();
    this.closing.add(closing);
    return closing.finally(() => this.closing.delete(closing));
  }

  /** Any outcome not pressed here (timed out, withdrawn, answered elsewhere) is edited into the prompt. */
  async settle(payload: JsonObject): Promise<void> {
    const id = String(payload.id ?? '');
    const by = String(payload.by ?? 'unknown');
    if (by.startsWith('telegram:')) return; // a press here: onCallback edits the prompts
    const prompts = this.deps.ledger.take(id);
    if (!prompts) return;
    const decision = String(payload.decision) as Extract<ConfirmationStatus, { state: 'ended' }>['decision'];
    await this.closePrompts(prompts, outcomeNote({ state: 'ended', group: '', decision, by }) ?? '');
  }

  async onCallback(query: TgCallbackQuery): Promise<void> {
    const answer = (text: string): Promise<void> =>
      this.deps.api
        .call('answerCallbackQuery', { callback_query_id: query.id, text }, { signal: this.deps.stopping })
        .then(() => undefined)
        .catch((err: unknown) => log.warn({ err: describe(err) }, 'answerCallbackQuery failed'));
    const match = CALLBACK.exec(query.data ?? '');
    const chat = query.message ? String(query.message.chat.id) : null;
    const group = chat === null ? undefined : this.deps.chats.get(chat);
    if (!match || !group) return answer('Not allowed');
    const user = String(query.from?.id);
    if (!this.deps.owners.has(user)) {
      log.warn({ chat, from: user }, 'confirmation button pressed by someone who is not an owner');
      return answer('Not allowed');
    }
    const [, id, verdict, hash] = match;
    const approve = verdict !== 'd';
    const allowHours = verdict === 's' ? STANDING_HOURS : undefined;
    let outcome: 'resolved' | 'gone' | 'stale' | 'failed' | 'elsewhere';
    try {
      const result = await this.deps.services.resolveConfirmation(id, approve, user, group, allowHours, hash);
      outcome = result === 'stale' ? 'stale' : result ? 'resolved' : 'gone';
    } catch (err) {
      outcome = 'failed';
      log.error({ err: describe(err) }, 'resolveConfirmation failed');
    }
    const decision = allowHours ? `Approved, and allowed with these exact arguments for ${STANDING_HOURS} h` : approve ? 'Approved' : 'Denied';
    // Nothing was pending: say how the request ended, as the core knows it (answered,
    // expired, withdrawn; or gone with a core that restarted), not a guess.
    const status = outcome === 'gone' ? await this.deps.services.confirmationStatus(id).catch(() => null) : null;
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
    const everywhere = outcome === 'resolved' || ended !== null ? this.deps.ledger.take(id) : undefined;
    await this.closePrompts(everywhere ?? pressed, note);
  }
}
