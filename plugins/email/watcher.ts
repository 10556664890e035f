// New mail in the watched folders becomes message.inbound for its group. One connection:
// every folder is synced by UID (everything above the last UID handled, under the same
// UIDVALIDITY), then the first folder stays selected and the connection IDLEs on it (or
// imapflow polls, on a server without IDLE): new mail there wakes the watcher at once; the
// others are synced again every poll interval, and all of them when the connection comes
// back. Progress is saved after every mail (sync-state.ts).
import { createHash } from 'node:crypto';
import pino from 'pino';
import type { ImapFlow } from 'imapflow';
import type { JsonObject } from '#sdk';
import { imapClient } from './imap.js';
import { parseMail, type MailView } from './mail.js';
import { startsAgent } from './policy.js';
import { watchedFolders, type Settings } from './settings.js';
import type { SyncState } from './sync-state.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'email' } }, pino.destination(2));

/** Mails handled per folder per sync: a flood is worked through over several passes. */
const BATCH = 100;

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
        for (const folder of [...folders.slice(1), ...folders.slice(0, 1)]) {
          if (this.stopping) return;
          await this.sync(this.client, folder);
        }
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

  private async sync(client: ImapFlow, folder: string): Promise<void> {
    const lock = await client.getMailboxLock(folder, { readOnly: true });
    try {
      const mailbox = client.mailbox;
      if (!mailbox) return;
      const uidvalidity = String(mailbox.uidValidity);
      const saved = this.state.get(folder);
      if (!saved || saved.uidvalidity !== uidvalidity) {
        // First run: the mail already there is not new. A new UIDVALIDITY: the old UIDs mean
        // nothing now, and replaying the folder would start the agent on old mail.
        if (saved) log.error({ folder }, 'the folder\'s UIDVALIDITY changed: mail from before now is not replayed');
        this.state.set(folder, { uidvalidity, last_uid: Math.max(0, mailbox.uidNext - 1) });
        return;
      }
      // Always ask: a folder that stays selected keeps the counts it had when it was opened.
      const found = await client.search({ uid: `${saved.last_uid + 1}:*` }, { uid: true });
      const uids = (Array.isArray(found) ? found : []).filter((u) => u > saved.last_uid).sort((a, b) => a - b).slice(0, BATCH);
      for (const uid of uids) {
        if (this.stopping) return;
        await this.handle(client, folder, uidvalidity, uid);
        this.state.set(folder, { uidvalidity, last_uid: uid });
      }
      if (uids.length === BATCH) this.wake?.();
    } finally {
      lock.release();
    }
  }

  private async handle(client: ImapFlow, folder: string, uidvalidity: string, uid: number): Promise<void> {
    const max = this.settings.maxMessageBytes;
    const message = await client.fetchOne(String(uid), { uid: true, size: true, source: { maxLength: max } }, { uid: true });
    if (!message || !message.source) return; // expunged meanwhile
    const view = await parseMail(message.source, this.settings.maxBodyChars, (message.size ?? 0) > max);
    const admission = startsAgent(this.settings, view, folder);
    // The reason and the UID only: a stranger's mail is neither shown nor logged.
    if (!admission.ok) {
      log.info({ folder, uid, reason: admission.reason }, 'mail starts no agent');
      return;
    }
    const folderId = createHash('sha256').update(folder).digest('hex').slice(0, 16);
    await this.publish(admission.group, inboundPayload(view, folder, uid), `mail ${folderId} ${uidvalidity}:${uid}`);
    this.onSeen({ group: admission.group, folder, uid, view });
  }
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
