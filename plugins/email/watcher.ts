// New mail in the watched folders becomes message.inbound for its group. One connection:
// every folder is synced by UID (everything above the last UID handled, under the same
// UIDVALIDITY), then the first folder stays selected and the connection IDLEs on it (or
// imapflow polls, on a server without IDLE): new mail there wakes the watcher at once; the
// others are synced again every poll interval, and all of them when the connection comes
// back. Progress is saved after every mail (sync-state.ts).
//
// Anyone can send mail here, so every mail is bounded: its header is fetched and judged
// first (a stranger's body is never fetched nor parsed); a mail whose From names a listed
// sender is fetched whole (up to max_message_bytes) and its sender checked on the raw bytes
// (sender-auth.ts) before anything parses its body; a parse has a time limit, and a mail
// that cannot be handled (refused by the parser, too slow, or one the process died handling
// twice) is logged by UID and reason and skipped: it never stops the mail after it. A mail
// whose check could not finish (a DNS lookup failed) is deferred and checked again later,
// with back-off, for up to a day; then the group's people are told of it.
import { createHash } from 'node:crypto';
import pino from 'pino';
import type { ImapFlow } from 'imapflow';
import type { JsonObject } from '#sdk';
import { imapClient } from './imap.js';
import { PARSE_MS, parseMailWithin, type MailView } from './mail.js';
import { addressed, startsAgent } from './policy.js';
import type { SenderChecks } from './sender-checks.js';
import { watchedFolders, type Settings } from './settings.js';
import type { Deferred, SyncState } from './sync-state.js';
import { agentFields, external } from './external-text.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'email' } }, pino.destination(2));

/** Mails handled per folder per sync: a flood is worked through over several passes. */
const BATCH = 100;
/** The first bytes of each mail fetched: its header must end within them. */
export const HEAD_BYTES = 256 * 1024;
/** Times the process may end while handling one mail before the mail is skipped. */
const MAX_TRIES = 2;
/** A deferred mail is checked again after a minute, then twice as long each time (at most an hour)... */
const RETRY_FIRST_MS = 60_000;
const RETRY_MAX_MS = 3_600_000;
/** ...and given up a day after it was first deferred. */
const GIVE_UP_MS = 24 * 3_600_000;

/** How handling a mail ended: done with it, or to be checked again (whose it says it is, for a notice). */
type Outcome = { done: true } | { done: false; group: string; from: string; subject: string };
const DONE: Outcome = { done: true };

export interface Seen {
  group: string;
  folder: string;
  uid: number;
  view: MailView;
  /** The core keeps it unhandled until carapace.json allows it (why): it started no turn. */
  held?: string;
}

export class Watcher {
  private stopping = false;
  private client: ImapFlow | null = null;
  private wake: (() => void) | null = null;
  /**
   * New mail or a closed connection since the last sync began. The server may report new
   * mail in the answer to any command (a fetch of the mail before it), not only in IDLE:
   * such a report must not be lost while nothing waits for it, or that mail would wait
   * for the next poll.
   */
  private woken = false;
  private loop: Promise<void> | null = null;

  constructor(
    private readonly settings: Settings,
    private readonly state: SyncState,
    private readonly checks: SenderChecks,
    private readonly proxy: string | undefined,
    /** Resolves once the plugin host holds the event: only then is progress saved past it. */
    private readonly publish: (group: string, payload: JsonObject, key: string) => Promise<{ held?: string }>,
    /** A mail was handed to its group's agent (the console's page lists it). */
    private readonly onSeen: (seen: Seen) => void = () => undefined,
    /** A listed sender's mail could not be read and was skipped: what to tell the group's people. */
    private readonly onSkipped: (group: string, notice: string) => void = () => undefined,
  ) {}

  /**
   * Connects and syncs every folder once (so that a wrong password or folder fails the
   * plugin's start, and a first run's starting point is fixed before the plugin says it is
   * ready), then runs in the background.
   */
  async start(): Promise<void> {
    const client = (this.client = await this.connect());
    for (const folder of watchedFolders(this.settings)) await this.sync(client, folder);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    this.client?.close();
    await this.loop?.catch(() => undefined);
  }

  private async connect(): Promise<ImapFlow> {
    const client = imapClient(this.settings.imap, this.proxy);
    client.on('error', (err: Error) => log.warn({ err: err.message }, 'IMAP connection error'));
    const poke = (): void => {
      this.woken = true;
      this.wake?.();
    };
    client.on('exists', poke);
    client.on('close', poke);
    await client.connect();
    return client;
  }

  private async run(): Promise<void> {
    let backoffMs = 1000;
    while (!this.stopping) {
      try {
        if (!this.client?.usable) {
          this.client?.close();
          this.client = await this.connect();
          backoffMs = 1000;
        }
        // The first folder last: it stays selected, and imapflow IDLEs on it.
        const folders = watchedFolders(this.settings);
        this.woken = false;
        let more = false;
        for (const folder of [...folders.slice(1), ...folders.slice(0, 1)]) {
          if (this.stopping) return;
          if (await this.sync(this.client, folder)) more = true;
        }
        // A flood is worked through batch after batch, not one batch per poll interval.
        if (more) continue;
        // IDLE now: imapflow would start it by itself only after 15 s of quiet, and mail
        // arriving meanwhile would wait that long. New mail in the folder wakes us (`exists`).
        void this.client.idle({ whenFree: true }).catch(() => undefined);
        await this.idle(this.settings.pollIntervalMs);
      } catch (err) {
        if (this.stopping) return;
        log.warn({ err: (err as Error).message, retry_in_ms: backoffMs }, 'mail sync failed; trying again');
        this.client?.close();
        this.woken = false; // the close just made: the back-off still holds
        await this.idle(backoffMs);
        backoffMs = Math.min(backoffMs * 2, 60_000);
      }
    }
  }

  /** Until new mail shows in the selected folder, the connection closes, or `ms` pass. */
  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
      if (this.stopping || this.woken) done();
    });
  }

  /** Handles up to BATCH new mails of `folder`; true when more are waiting. */
  private async sync(client: ImapFlow, folder: string): Promise<boolean> {
    const lock = await client.getMailboxLock(folder, { readOnly: true });
    try {
      const mailbox = client.mailbox;
      if (!mailbox) return false;
      const uidvalidity = String(mailbox.uidValidity);
      const saved = this.state.get(folder);
      if (!saved || saved.uidvalidity !== uidvalidity) {
        // First run: the mail already there is not new. A new UIDVALIDITY: the old UIDs mean
        // nothing now, and replaying the folder would start the agent on old mail.
        if (saved) log.error({ folder }, 'the folder\'s UIDVALIDITY changed: mail from before now is not replayed');
        this.state.set(folder, { uidvalidity, last_uid: Math.max(0, mailbox.uidNext - 1), deferred: [] });
        return false;
      }
      // Always ask: a folder that stays selected keeps the counts it had when it was opened.
      const found = await client.search({ uid: `${saved.last_uid + 1}:*` }, { uid: true });
      const uids = (Array.isArray(found) ? found : []).filter((u) => u > saved.last_uid).sort((a, b) => a - b).slice(0, BATCH);
      await this.retryDeferred(client, folder, uidvalidity);
      for (const uid of uids) {
        if (this.stopping) return false;
        if (this.state.begin(folder, uid) >= MAX_TRIES) log.error({ folder, uid, reason: `the plugin ended ${MAX_TRIES} times while handling it` }, 'mail skipped');
        else {
          const outcome = await this.handle(client, folder, uidvalidity, uid);
          // Saved as deferred before the progress passes it: a crash now loses nothing.
          if (!outcome.done) this.defer(folder, [...this.state.deferred(folder), { uid, since: Date.now(), tries: 1, next: Date.now() + RETRY_FIRST_MS }]);
        }
        this.state.set(folder, { uidvalidity, last_uid: uid });
      }
      return uids.length === BATCH;
    } finally {
      lock.release();
    }
  }

  /** The deferred mails of `folder` whose time has come, checked again; given up after GIVE_UP_MS. */
  private async retryDeferred(client: ImapFlow, folder: string, uidvalidity: string): Promise<void> {
    const now = Date.now();
    const list = this.state.deferred(folder);
    if (!list.some((d) => d.next <= now)) return;
    const kept: Deferred[] = [];
    for (const d of list) {
      if (d.next > now || this.stopping) {
        kept.push(d);
        continue;
      }
      const outcome = await this.handle(client, folder, uidvalidity, d.uid);
      if (outcome.done) continue;
      if (Date.now() - d.since >= GIVE_UP_MS) {
        this.giveUp(folder, d.uid, outcome);
        continue;
      }
      kept.push({ ...d, tries: d.tries + 1, next: Date.now() + Math.min(RETRY_FIRST_MS * 2 ** d.tries, RETRY_MAX_MS) });
    }
    this.defer(folder, kept);
  }

  /** Saves the folder's deferred list; any it cannot keep are given up at once. */
  private defer(folder: string, list: Deferred[]): void {
    for (const d of this.state.setDeferred(folder, list)) {
      log.error({ folder, uid: d.uid, reason: 'too many mails wait for their sender check' }, 'mail skipped');
    }
  }

  private giveUp(folder: string, uid: number, outcome: Extract<Outcome, { done: false }>): void {
    log.error({ folder, uid, reason: 'its sender could not be checked for a day' }, 'mail skipped');
    this.onSkipped(outcome.group, `A mail from ${outcome.from} ("${outcome.subject}") could not be checked (its sender's DKIM key or DMARC policy could not be looked up for a day) and reached no agent; open it in your mail client.`);
  }

  private async handle(client: ImapFlow, folder: string, uidvalidity: string, uid: number): Promise<Outcome> {
    const max = this.settings.maxMessageBytes;
    const first = await client.fetchOne(String(uid), { uid: true, size: true, source: { maxLength: Math.min(HEAD_BYTES, max) } }, { uid: true });
    if (!first || !first.source) return DONE; // expunged meanwhile
    const size = first.size ?? first.source.length;
    const complete = size <= first.source.length;
    // Whose it says it is needs the header only: a stranger's body is never fetched nor parsed.
    const headEnd = endOfHeader(first.source);
    if (headEnd < 0 && !complete) return skipped(folder, uid, 'HEADER_TOO_LARGE', `no end of header within ${HEAD_BYTES} bytes`);
    const head = await parseMailWithin(headEnd < 0 ? first.source : first.source.subarray(0, headEnd), 0, false, PARSE_MS);
    if (!head.ok) return skipped(folder, uid, head.code, head.reason);
    const early = addressed(this.settings, head.view, folder, null);
    // The reason and the UID only: a stranger's mail is neither shown nor logged.
    if (!early.ok) return noAgent(folder, uid, early.reason);
    const from = head.view.from!;
    // Said in a notice only if the sender turns out to be who it says (or cannot be checked).
    const subject = external(head.view.subject).slice(0, 120);
    if (size > max) return noAgent(folder, uid, `larger than max_message_bytes (${size} bytes): its signature cannot be checked`);
    const whole = complete ? first : await client.fetchOne(String(uid), { uid: true, size: true, source: { maxLength: max } }, { uid: true });
    if (!whole || !whole.source) return DONE;
    const verdict = await this.checks.verdict({ folder, uidvalidity, uid }, whole.source, from);
    if (verdict.kind === 'temporary') {
      log.info({ folder, uid, reason: verdict.reason }, 'sender check deferred');
      return { done: false, group: early.group, from, subject };
    }
    if (verdict.kind === 'refused') return noAgent(folder, uid, `sender not authenticated (${verdict.reason})`);
    const parsed = await parseMailWithin(whole.source, this.settings.maxBodyChars, false, PARSE_MS);
    if (!parsed.ok) {
      // Its sender counts: the person would wait for an answer that never comes.
      this.onSkipped(early.group, `A mail from ${from} ("${subject}") could not be read (${parsed.code}) and reached no agent; open it in your mail client.`);
      return skipped(folder, uid, parsed.code, parsed.reason);
    }
    const view = parsed.view;
    if (view.from !== from) return noAgent(folder, uid, 'its From reads differently in the header and in the whole mail');
    const admission = startsAgent(this.settings, view, folder, verdict);
    if (!admission.ok) return noAgent(folder, uid, admission.reason);
    const folderId = createHash('sha256').update(folder).digest('hex').slice(0, 16);
    const { held } = await this.publish(admission.group, inboundPayload(view, folder, uid, this.settings.maxBodyChars), `mail ${folderId} ${uidvalidity}:${uid}`);
    this.onSeen({ group: admission.group, folder, uid, view, ...(held === undefined ? {} : { held }) });
    return DONE;
  }
}

function noAgent(folder: string, uid: number, reason: string): Outcome {
  log.info({ folder, uid, reason }, 'mail starts no agent');
  return DONE;
}

function skipped(folder: string, uid: number, code: string, reason: string): Outcome {
  log.warn({ folder, uid, code, reason }, 'mail skipped: it could not be handled');
  return DONE;
}

/** Where the header ends (the blank line's end), or -1. */
function endOfHeader(source: Buffer): number {
  const crlf = source.indexOf('\r\n\r\n');
  const lf = source.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf <= lf)) return crlf + 4;
  return lf >= 0 ? lf + 2 : -1;
}

/** The event for a mail: everything its sender wrote escaped (external-text.ts). */
export function inboundPayload(view: MailView, folder: string, uid: number, maxBodyChars: number): JsonObject {
  const shown = agentFields(view, maxBodyChars);
  return {
    channel: 'email',
    sender: shown.from ?? '',
    content_type: 'email',
    body: shown.body,
    metadata: {
      from: shown.from,
      from_name: shown.from_name,
      subject: shown.subject,
      date: view.date,
      message_id: view.message_id === null ? null : external(view.message_id),
      folder,
      uid,
      truncated: shown.truncated,
      hidden_chars: shown.hidden_chars,
      styles_not_evaluated: shown.styles_not_evaluated,
      attachments: shown.attachments,
    },
  };
}
