// New mail in the watched folders becomes message.inbound for its group. One connection:
// every folder is synced by UID (everything above the last UID handled, under the same
// UIDVALIDITY), then the first folder stays selected and the connection IDLEs on it (or
// imapflow polls, on a server without IDLE): new mail there wakes the watcher at once; the
// others are synced again every poll interval, and all of them when the connection comes
// back. Progress is saved after every mail (sync-state.ts).
//
// Anyone can send mail here, so every mail is bounded: its header is fetched and judged
// first (a stranger's body is never fetched nor parsed), a parse has a time limit, and a
// mail that cannot be handled (refused by the parser, too slow, or one the process died
// handling twice) is logged by UID and reason and skipped: it never stops the mail after it.
import { createHash } from 'node:crypto';
import pino from 'pino';
import type { ImapFlow } from 'imapflow';
import type { JsonObject } from '#sdk';
import { imapClient } from './imap.js';
import { PARSE_MS, parseMailWithin, type MailView } from './mail.js';
import { startsAgent } from './policy.js';
import { watchedFolders, type Settings } from './settings.js';
import type { SyncState } from './sync-state.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'email' } }, pino.destination(2));

/** Mails handled per folder per sync: a flood is worked through over several passes. */
const BATCH = 100;
/** The first bytes of each mail fetched: its header must end within them. */
export const HEAD_BYTES = 256 * 1024;
/** Times the process may end while handling one mail before the mail is skipped. */
const MAX_TRIES = 2;

export interface Seen {
  group: string;
  folder: string;
  uid: number;
  view: MailView;
}

export class Watcher {
  private stopping = false;
  private client: ImapFlow | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  constructor(
    private readonly settings: Settings,
    private readonly state: SyncState,
    private readonly proxy: string | undefined,
    /** Resolves once the plugin host holds the event: only then is progress saved past it. */
    private readonly publish: (group: string, payload: JsonObject, key: string) => Promise<void>,
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
    client.on('exists', () => this.wake?.());
    client.on('close', () => this.wake?.());
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
      if (this.stopping) done();
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
        this.state.set(folder, { uidvalidity, last_uid: Math.max(0, mailbox.uidNext - 1) });
        return false;
      }
      // Always ask: a folder that stays selected keeps the counts it had when it was opened.
      const found = await client.search({ uid: `${saved.last_uid + 1}:*` }, { uid: true });
      const uids = (Array.isArray(found) ? found : []).filter((u) => u > saved.last_uid).sort((a, b) => a - b).slice(0, BATCH);
      for (const uid of uids) {
        if (this.stopping) return false;
        if (this.state.begin(folder, uid) >= MAX_TRIES) log.error({ folder, uid, reason: `the plugin ended ${MAX_TRIES} times while handling it` }, 'mail skipped');
        else await this.handle(client, folder, uidvalidity, uid);
        this.state.set(folder, { uidvalidity, last_uid: uid });
      }
      return uids.length === BATCH;
    } finally {
      lock.release();
    }
  }

  private async handle(client: ImapFlow, folder: string, uidvalidity: string, uid: number): Promise<void> {
    const max = this.settings.maxMessageBytes;
    const first = await client.fetchOne(String(uid), { uid: true, size: true, source: { maxLength: Math.min(HEAD_BYTES, max) } }, { uid: true });
    if (!first || !first.source) return; // expunged meanwhile
    const size = first.size ?? first.source.length;
    const complete = size <= first.source.length;
    // The sender check needs the header only: a stranger's body is never fetched nor parsed.
    const headEnd = endOfHeader(first.source);
    if (headEnd < 0 && !complete) return skipped(folder, uid, 'HEADER_TOO_LARGE', `no end of header within ${HEAD_BYTES} bytes`);
    const head = await parseMailWithin(headEnd < 0 ? first.source : first.source.subarray(0, headEnd), 0, false, PARSE_MS);
    if (!head.ok) return skipped(folder, uid, head.code, head.reason);
    const early = startsAgent(this.settings, head.view, folder);
    // The reason and the UID only: a stranger's mail is neither shown nor logged.
    if (!early.ok) {
      log.info({ folder, uid, reason: early.reason }, 'mail starts no agent');
      return;
    }
    const whole = complete ? first : await client.fetchOne(String(uid), { uid: true, size: true, source: { maxLength: max } }, { uid: true });
    if (!whole || !whole.source) return;
    const parsed = await parseMailWithin(whole.source, this.settings.maxBodyChars, size > max, PARSE_MS);
    if (!parsed.ok) {
      // Its sender counts: the person would wait for an answer that never comes.
      const subject = (head.view.subject ?? '').replace(/[\p{Cc}\p{Cf}]+/gu, ' ').slice(0, 120);
      this.onSkipped(early.group, `A mail from ${head.view.from} ("${subject}") could not be read (${parsed.code}) and reached no agent; open it in your mail client.`);
      return skipped(folder, uid, parsed.code, parsed.reason);
    }
    const view = parsed.view;
    const admission = startsAgent(this.settings, view, folder);
    if (!admission.ok) {
      log.info({ folder, uid, reason: admission.reason }, 'mail starts no agent');
      return;
    }
    const folderId = createHash('sha256').update(folder).digest('hex').slice(0, 16);
    await this.publish(admission.group, inboundPayload(view, folder, uid), `mail ${folderId} ${uidvalidity}:${uid}`);
    this.onSeen({ group: admission.group, folder, uid, view });
  }
}

function skipped(folder: string, uid: number, code: string, reason: string): void {
  log.warn({ folder, uid, code, reason }, 'mail skipped: it could not be handled');
}

/** Where the header ends (the blank line's end), or -1. */
function endOfHeader(source: Buffer): number {
  const crlf = source.indexOf('\r\n\r\n');
  const lf = source.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf <= lf)) return crlf + 4;
  return lf >= 0 ? lf + 2 : -1;
}

export function inboundPayload(view: MailView, folder: string, uid: number): JsonObject {
  return {
    channel: 'email',
    sender: view.from ?? '',
    content_type: 'email',
    body: view.body,
    metadata: {
      from: view.from,
      subject: view.subject,
      date: view.date,
      message_id: view.message_id,
      folder,
      uid,
      truncated: view.truncated,
      attachments: view.attachments,
    },
  };
}
