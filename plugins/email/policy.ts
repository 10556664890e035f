// Which mail an agent may see, and which may start it. Mail is shown only when its one From
// address is a sender listed for the group, the receiving server authenticated that
// address (auth-results.ts), and it lies in one of the group's folders. Automated mail
// never starts an agent unless the group allows it.
import { isAutomated, verifySender } from './auth-results.js';
import type { MailView } from './mail.js';
import type { Settings } from './settings.js';

export type Admission = { ok: true; group: string } | { ok: false; reason: string };

/** May the agent of `group` (any group when null) see this mail of `folder`? */
export function admit(settings: Settings, view: Pick<MailView, 'from' | 'fromCount' | 'headerLines'>, folder: string, group: string | null): Admission {
  if (view.from === null) return { ok: false, reason: `From holds ${view.fromCount} addresses, not one` };
  const owner = settings.senders.get(view.from);
  if (owner === undefined) return { ok: false, reason: 'sender not listed' };
  if (group !== null && owner !== group) return { ok: false, reason: 'sender listed for another group' };
  if (!settings.mailboxes.get(owner)?.folders.includes(folder)) return { ok: false, reason: 'folder is not one of the group\'s' };
  const verdict = verifySender(view.headerLines, settings.verifier, view.from);
  if (!verdict.authenticated) return { ok: false, reason: `sender not authenticated (${verdict.reason})` };
  return { ok: true, group: owner };
}

/** May this mail start its group's agent? (admitted, and not automated unless allowed) */
export function startsAgent(settings: Settings, view: MailView, folder: string): Admission {
  const admission = admit(settings, view, folder, null);
  if (!admission.ok) return admission;
  if (isAutomated(view.headerLines) && !settings.mailboxes.get(admission.group)?.automated) return { ok: false, reason: 'automated mail' };
  return admission;
}
