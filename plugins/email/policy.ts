// Which mail an agent may see, and which may start it. Mail is shown only when its header
// holds one From line with one address, that address is a sender listed for the group,
// the mail lies in one of the group's folders, and its sender is authenticated: the
// plugin's own DKIM/DMARC check of the raw mail (sender-auth.ts) passed, and the
// configured receiving server's verdict, where one is configured, does not refuse it
// (auth-results.ts: a second opinion, never enough alone). Automated mail never starts an
// agent unless the group allows it.
import { serverObjection } from './auth-results.js';
import { automatedMarker } from './automated.js';
import type { MailView } from './mail.js';
import type { SenderVerdict } from './sender-auth.js';
import type { Settings } from './settings.js';

export type Admission = { ok: true; group: string } | { ok: false; reason: string; /** Ask again later (a lookup did not happen). */ temporary?: true };

type Header = Pick<MailView, 'from' | 'fromCount' | 'fromLines' | 'headerLines'>;

/**
 * Does this mail's header name a sender of `group` (any group when null), in one of its
 * folders? Only such a mail is fetched whole and checked further: a stranger's body is never
 * fetched nor parsed.
 */
export function addressed(settings: Settings, view: Header, folder: string, group: string | null): Admission {
  if (view.fromLines !== 1) return { ok: false, reason: `${view.fromLines} From headers, not one` };
  if (view.from === null) return { ok: false, reason: `From holds ${view.fromCount} addresses, not one` };
  const owner = settings.senders.get(view.from);
  if (owner === undefined) return { ok: false, reason: 'sender not listed' };
  if (group !== null && owner !== group) return { ok: false, reason: 'sender listed for another group' };
  if (!settings.mailboxes.get(owner)?.folders.includes(folder)) return { ok: false, reason: 'folder is not one of the group\'s' };
  return { ok: true, group: owner };
}

/** May the agent of `group` (any group when null) see this mail of `folder`, whose sender check came to `verdict`? */
export function admit(settings: Settings, view: Header, folder: string, group: string | null, verdict: SenderVerdict): Admission {
  const addressedTo = addressed(settings, view, folder, group);
  if (!addressedTo.ok) return addressedTo;
  if (verdict.kind === 'temporary') return { ok: false, reason: `sender not authenticated yet (${verdict.reason})`, temporary: true };
  if (verdict.kind === 'refused') return { ok: false, reason: `sender not authenticated (${verdict.reason})` };
  if (settings.verifier) {
    const objection = serverObjection(view.headerLines, settings.verifier, view.from!, verdict.domains);
    if (objection) return { ok: false, reason: `sender not authenticated (${objection})` };
  }
  return addressedTo;
}

/** May this mail start its group's agent? (admitted, and not automated unless allowed) */
export function startsAgent(settings: Settings, view: Header, folder: string, verdict: SenderVerdict): Admission {
  const admission = admit(settings, view, folder, null, verdict);
  if (!admission.ok) return admission;
  const marker = automatedMarker(view.headerLines);
  if (marker !== null && !settings.mailboxes.get(admission.group)?.automated) return { ok: false, reason: `automated mail (${marker})` };
  return admission;
}
