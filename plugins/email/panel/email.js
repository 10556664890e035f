// The email page (served by the email plugin, mounted by the console at /plugins/email/):
// per group, the latest mails that reached its agent, the latest it sent, and the sends
// that failed (to whom, when, the error). Read only.
// Every field is a text child of the template (htm escapes it): a subject is whatever a
// sender wrote, and must never become markup here. Subjects and senders come as the agent
// got them (invisible characters as ⟦U+…⟧ escapes), with how much hidden HTML text was left out
// and whether the mail's style sheets were too large to evaluate in full.
import { html, render, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { GroupSelect, usePanelGroups } from '/assets/panel-groups.js';
import { get } from '/assets/api.js';


const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
const list = (addresses) => (addresses && addresses.length ? addresses.join(', ') : '');

function Received({ mails }) {
  if (mails.length === 0) return html`<p class="muted">No mail has reached this group's agent yet.</p>`;
  return html`<div class="scroll"><table id="received" class="wide"><thead><tr><th>Arrived</th><th>From</th><th>Subject</th><th>Folder</th><th>Started a turn</th><th>Hidden text</th></tr></thead>
    <tbody>${mails.map((m) => html`<tr data-uid=${m.uid}>
      <td title=${m.date ? `Date: ${when(m.date)}` : ''}>${when(m.at)}</td>
      <td class="mono">${m.from}</td>
      <td class="subject">${m.subject || '(no subject)'}</td>
      <td>${m.folder}</td>
      <td class="started">${m.started ? 'yes' : 'no'}${m.read ? html` <span class="muted">(read by the agent)</span>` : ''}${m.held ? html` <span class="bad">(not handled: ${m.held}; kept until carapace.json allows it)</span>` : ''}</td>
      <td class="hidden-text">${m.hidden_chars ? `${m.hidden_chars.toLocaleString()} characters a reader would not see, left out` : ''}${m.styles_not_evaluated && m.styles_not_evaluated.length ? html`<div class="warn styles-not-evaluated">Style sheets not evaluated in full (${m.styles_not_evaluated.join('; ')}): text they hide may have reached the agent.</div>` : ''}</td>
    </tr>`)}</tbody></table></div>`;
}

function Sent({ mails }) {
  if (mails.length === 0) return html`<p class="muted">The agent has sent no mail for this group yet.</p>`;
  return html`<div class="scroll"><table id="sent" class="wide"><thead><tr><th>Sent</th><th>To</th><th>Subject</th><th>How</th><th>Approved</th></tr></thead>
    <tbody>${mails.map((m) => html`<tr>
      <td>${when(m.at)}</td>
      <td class="mono recipients">${list(m.to)}${m.cc.length ? ` · cc ${list(m.cc)}` : ''}${m.bcc.length ? ` · bcc ${list(m.bcc)}` : ''}</td>
      <td class="subject">${m.subject}</td>
      <td>${m.tool === 'reply_email' ? 'reply' : 'new mail'}</td>
      <td class="approved">${m.approved === true ? html`<span class="ok">yes</span>${m.approved_by ? ` (${m.approved_by})` : ''}` : m.approved === false ? html`<span class="muted">not asked (listed recipients)</span>` : html`<span class="warn">unknown</span>`}</td>
    </tr>`)}</tbody></table></div>`;
}

/** Sends the SMTP server did not take, or whose outcome is unknown: to whom, when, and the error the agent got. */
function Failed({ mails }) {
  if (mails.length === 0) return html`<p class="muted">No send has failed for this group.</p>`;
  return html`<div class="scroll"><table id="failed" class="wide"><thead><tr><th>Tried</th><th>To</th><th>Subject</th><th>How</th><th>Error</th></tr></thead>
    <tbody>${mails.map((m) => html`<tr>
      <td>${when(m.at)}</td>
      <td class="mono recipients">${list(m.to)}${m.cc.length ? ` · cc ${list(m.cc)}` : ''}${m.bcc.length ? ` · bcc ${list(m.bcc)}` : ''}</td>
      <td class="subject">${m.subject}</td>
      <td>${m.tool === 'reply_email' ? 'reply' : 'new mail'}</td>
      <td class="error-text"><span class="${m.code === 'RESULT_UNKNOWN' ? 'warn' : 'bad'} mono">${m.code}</span> ${m.message}</td>
    </tr>`)}</tbody></table></div>`;
}

function Email() {
  const [recent, setRecent] = useState(null);
  const [error, setError] = useState(null);
  const [groups, group, setGroup] = usePanelGroups(setError);

  const load = () => group && get(`./api/recent?group=${encodeURIComponent(group)}`).then((r) => (setRecent(r), setError(null)), (err) => setError(err.message));
  useEffect(() => void load(), [group]);

  return html`<main class="page">
    <div class="row"><a href="/">← Console</a><h1 style="margin:0 12px">Email</h1>
      <${GroupSelect} groups=${groups} group=${group} setGroup=${setGroup} />
      <button id="refresh" onClick=${() => load()}>Refresh</button></div>
    ${error && html`<div class="error" role="alert">${error}</div>`}
    ${groups.length === 0 && html`<p class="muted">No group has a mailbox configured.</p>`}
    ${recent && html`<section>
      <h2>Mail the agent saw</h2>
      <p class="muted">Only mail from senders listed for this group, with a valid DKIM signature of their domain (checked by the plugin). Mail from anyone else never reaches the agent and is not shown here.</p>
      <${Received} mails=${recent.received} />
      <h2>Mail the agent sent</h2>
      <${Sent} mails=${recent.sent} />
      <h2>Sends that failed</h2>
      <p class="muted">What the agent tried to send and the mail server did not take, could not be reached for, or lost the connection during (RESULT_UNKNOWN: it may have gone out all the same).</p>
      <${Failed} mails=${recent.failed ?? []} />
    </section>`}
  </main>`;
}

render(html`<${Email} />`, document.getElementById('email'));
