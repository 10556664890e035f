// What the console's email page shows: per group, the latest mails that reached its agent
// (started a turn, or were read with read_email), the latest it sent, and the sends that
// failed (the SMTP server refused, could not be reached, or the connection broke). Only mail the
// policy admitted is ever recorded (a stranger's mail is neither shown nor logged). Kept
// in the plugin's data folder, a bounded list per group, replaced whole on each change
// (writeAtomically), so that the page survives restarts.
import { join } from 'node:path';
import { readVersionedJson, versionedJsonText, writeAtomically } from '#sdk';

export interface ReceivedMail {
  folder: string;
  uid: number;
  from: string;
  subject: string;
  /** The mail's own Date header (its sender's word), ISO, or null. */
  date: string | null;
  /** When the agent first got it. */
  at: string;
  /** It started a turn of the group's agent (the watcher handed it over). */
  started: boolean;
  /** Not handled: the core keeps it until carapace.json allows it (why). */
  held?: string;
  /** The agent read it with read_email. */
  read: boolean;
  /** Characters of its HTML a reader would not see, left out of what the agent got. */
  hidden_chars?: number;
  /** What of its style sheets was not evaluated (text they hide may have reached the agent). */
  styles_not_evaluated?: string[];
}

export interface SentMail {
  tool: 'send_email' | 'reply_email';
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  at: string;
  message_id: string;
  /** Whether a person approved this call (true, with who), none was asked (false), or unknown (null: the audit trail could not be read). */
  approved: boolean | null;
  approved_by?: string;
}

/** A send the SMTP server did not take (or whose outcome is unknown): to whom, when, and the error the agent got. */
export interface FailedSend {
  tool: 'send_email' | 'reply_email';
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  at: string;
  /** The error's code (UNREACHABLE, CONNECTION_LOST, RESULT_UNKNOWN, AUTH_ERROR, SMTP_REFUSED, ...) and message, as the agent got them. */
  code: string;
  message: string;
}

interface GroupMail {
  received: ReceivedMail[];
  sent: SentMail[];
  failed: FailedSend[];
}

const FILE = 'recent-mail.json';
/** Per group and list: enough for a look back, small enough to rewrite on each mail. */
export const RECENT_CAP = 50;

export class RecentMail {
  private readonly file: string;
  private groups = new Map<string, GroupMail>();

  constructor(
    dir: string,
    private readonly cap = RECENT_CAP,
  ) {
    this.file = join(dir, FILE);
  }

  /**
   * Reads the file, keeping only `groups` (those configured now). A corrupt file is moved
   * aside (its new name returned) and the lists start empty: they are a view, not a record.
   */
  load(groups: Iterable<string>): { movedAside?: string } {
    const state = readVersionedJson(this.file, { migrations: [(json) => json], read: (json) => (json as { groups?: Record<string, Partial<GroupMail>> }).groups ?? {} });
    if (state.kind === 'moved') return { movedAside: state.movedAside };
    if (state.kind === 'missing') return {};
    for (const group of groups) {
      const saved = state.value[group];
      if (!saved) continue;
      this.groups.set(group, {
        received: (Array.isArray(saved.received) ? saved.received : []).slice(0, this.cap),
        sent: (Array.isArray(saved.sent) ? saved.sent : []).slice(0, this.cap),
        failed: (Array.isArray(saved.failed) ? saved.failed : []).slice(0, this.cap),
      });
    }
    return {};
  }

  /** A mail reached the group's agent; the same mail again (a replay, a later read) updates its entry. */
  received(group: string, mail: Omit<ReceivedMail, 'at'>): void {
    const list = this.of(group).received;
    const index = list.findIndex((m) => m.folder === mail.folder && m.uid === mail.uid);
    if (index >= 0) {
      const known = list[index];
      list[index] = { ...known, started: known.started || mail.started, read: known.read || mail.read };
    } else {
      list.unshift({ ...mail, at: new Date().toISOString() });
      list.length = Math.min(list.length, this.cap);
    }
    this.save();
  }

  /** `mail.at`: when it went out (noted a moment later, once its approval is known: a later send may be noted first). */
  sent(group: string, mail: SentMail): void {
    const list = this.of(group).sent;
    const index = list.findIndex((m) => m.at <= mail.at);
    list.splice(index < 0 ? list.length : index, 0, mail);
    list.length = Math.min(list.length, this.cap);
    this.save();
  }

  /** A send that failed, newest first. */
  failed(group: string, send: FailedSend): void {
    const list = this.of(group).failed;
    list.unshift(send);
    list.length = Math.min(list.length, this.cap);
    this.save();
  }

  /** Newest first. */
  list(group: string): GroupMail {
    const mail = this.groups.get(group);
    return { received: [...(mail?.received ?? [])], sent: [...(mail?.sent ?? [])], failed: [...(mail?.failed ?? [])] };
  }

  private of(group: string): GroupMail {
    let mail = this.groups.get(group);
    if (!mail) this.groups.set(group, (mail = { received: [], sent: [], failed: [] }));
    return mail;
  }

  private save(): void {
    writeAtomically(this.file, versionedJsonText(1, { groups: Object.fromEntries(this.groups) }), 0o600);
  }
}
