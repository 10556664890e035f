import { html, useState } from '/assets/vendor/preact-htm.js';
import { del, post, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

/** How the page marks a message's origin (DESIGN 16); a person's own has no mark. */
const ORIGIN = {
  external: { label: 'external', title: 'Text from outside (a mail someone sent): never shown to the agent as yours' },
  derived: { label: 'after external', title: 'Written by a session that had read external content' },
};

/** One waiting chat: approve into an existing group or a new one, or refuse. */
function PairingRequest({ request, groups, done }) {
  const [group, setGroup] = useState(groups[0] ?? '');
  const [fresh, setFresh] = useState('');
  const [problem, setProblem] = useState(null);
  const act = (path, body) => post(`/api/pairing/${encodeURIComponent(request.code)}/${path}`, body).then(done, (err) => setProblem(err.message));
  return html`<div class="card pairing" data-code=${request.code}>
    <div class="row"><strong>${request.plugin} chat ${request.chat}</strong>${request.name && html`<span>${request.name}</span>`}
      <span class="muted">code ${request.code} · asked ${when(request.requested_at)} · until ${when(request.expires_at)}</span></div>
    ${request.text && html`<pre class="muted">“${request.text}”</pre>`}
    ${problem && html`<div class="error">${problem}</div>`}
    <div class="row actions">
      <select class="group" value=${group} onChange=${(e) => setGroup(e.target.value)}>${groups.map((g) => html`<option value=${g}>${g}</option>`)}</select>
      <button class="primary approve" disabled=${!group} onClick=${() => act('approve', { group })}>Connect to this group</button>
      <span class="muted">or a new group</span>
      <input class="new-group" placeholder="new group name" value=${fresh} onInput=${(e) => setFresh(e.target.value.trim())} />
      <button class="create" disabled=${!fresh} onClick=${() => act('approve', { group: fresh, create: true })}>Create and connect</button>
      <button class="danger deny" onClick=${() => act('deny', {})}>Refuse</button>
    </div></div>`;
}

/** How many messages are kept, and since when: an upgraded installation's chats may show earlier ones that were never kept here. */
function keptText(count, since) {
  const from = since ? ` since ${when(since)}` : '';
  return count === 0 ? `no messages kept yet${from} (each chat's own history may show earlier ones)` : `${count} message${count === 1 ? '' : 's'} kept${from}`;
}

/**
 * A group's kept conversation: what its next session is told of the earlier conversation
 * (the latest of it), and the person's button to clear it. Reloaded on every message and
 * reply of the group (audited) and on a clear.
 */
function Conversation({ group }) {
  const [open, setOpen] = useState(false);
  const [problem, setProblem] = useState(null);
  const path = `/api/conversation/${encodeURIComponent(group)}`;
  const convo = useData(path, (e) => open && e.type === 'audit' && e.group === group && (e.stage === 'event' || e.stage === 'response' || e.reason?.startsWith('conversation cleared')));
  const messages = convo.data?.messages ?? [];
  const workspace = convo.data?.workspace ?? null;
  const reviewed = () => {
    if (!confirm(`Take the files in group "${group}"'s workspace as yours? Its next sessions will no longer count them as external content.`)) return;
    post(`/api/workspace/${encodeURIComponent(group)}/reviewed`, {}).then(() => {
      setProblem(null);
      convo.reload();
    }, (err) => setProblem(err.message));
  };
  const clear = () => {
    if (!confirm(`Clear the conversation of group "${group}"? Its next session starts without it.`)) return;
    del(path).then(() => {
      setProblem(null);
      convo.reload();
    }, (err) => setProblem(err.message));
  };
  return html`<div class="card conversation" data-group=${group}>
    <div class="row"><strong>${group}</strong><span class="muted count">${keptText(messages.length, convo.data?.kept_since)}</span>
      <button class="show" type="button" onClick=${() => setOpen(!open)}>${open ? 'Hide' : 'Show'}</button>
      <button class="danger clear" type="button" disabled=${messages.length === 0} onClick=${clear}>Clear</button></div>
    ${problem && html`<div class="error">${problem}</div>`}
    ${convo.error && html`<div class="error">${convo.error}</div>`}
    ${workspace && html`<div class="warn workspace-label">
      <p>A session read external content on ${when(workspace.since)}; files its workspace holds from then on count as external, so each new session waits for you before it sends, shares or deletes anything.
        ${workspace.files.length > 0 ? ` Changed since: ${workspace.files.join(', ')}${workspace.more === true ? ' (the list may be incomplete)' : workspace.more > 0 ? ` and ${workspace.more} more` : ''}.` : ''}</p>
      <button class="reviewed" type="button" onClick=${reviewed}>I've checked these files</button></div>`}
    ${open && html`<div class="scroll"><table><thead><tr><th>When</th><th>Who</th><th>Text</th></tr></thead><tbody>
      ${messages.map((m) => html`<tr data-direction=${m.direction} data-origin=${m.origin}><td class="muted">${when(new Date(m.at).toISOString())}</td>
        <td>${m.direction === 'in' ? `${m.party} on ${m.channel}` : `agent → ${m.party} on ${m.channel}`}${ORIGIN[m.origin] ? html` <span class="warn origin" title=${ORIGIN[m.origin].title}>${ORIGIN[m.origin].label}</span>` : ''}</td><td><pre>${m.text}</pre></td></tr>`)}
    </tbody></table></div>`}
  </div>`;
}

export function Groups() {
  const groups = useData('/api/groups');
  const pairing = useData('/api/pairing', (e) => e.type === 'audit' && e.reason?.startsWith('pairing'));
  const reload = () => {
    groups.reload();
    pairing.reload();
  };
  const data = groups.data;
  if (!data) return html`<h1>Groups & channels</h1>${groups.error ? html`<div class="error">${groups.error}</div>` : html`<p class="muted">Loading…</p>`}`;
  const names = data.groups.map((g) => g.group);
  return html`<h1>Groups & channels</h1>
    <h2>Chats waiting to be connected</h2>
    ${pairing.error && html`<div class="error">${pairing.error}</div>`}
    ${(pairing.data?.pending ?? []).length === 0 ? html`<p class="muted">None. A chat the agent does not know gets a pairing code and shows up here; no agent answers it until you connect it.</p>` : ''}
    ${(pairing.data?.pending ?? []).map((r) => html`<${PairingRequest} key=${r.code} request=${r} groups=${names} done=${reload} />`)}
    <h2>Chats</h2>
    ${data.chats.length === 0 ? html`<p class="muted">No chat is mapped to a group. The web chat talks to every group.</p>` : html`
    <div class="scroll"><table><thead><tr><th>Channel</th><th>Chat</th><th>Group</th></tr></thead><tbody>
      ${data.chats.map((c) => html`<tr><td>${c.plugin}</td><td class="mono">${c.chat}</td><td>${c.group}</td></tr>`)}
    </tbody></table></div>`}
    <h2>Conversations</h2>
    <p class="muted">What each group's agent is told of the earlier conversation when a new session starts (after it was idle): the messages that came in on the group's chats and the replies that reached them, kept by Carapace. Clearing it here, or writing /forget in a chat, starts the next conversation afresh. Text from outside (a mail) is marked <span class="warn">external</span>, and replies written after reading it <span class="warn">after external</span>: a session that is told of either waits for you before it sends, shares or deletes anything.</p>
    ${names.map((g) => html`<${Conversation} key=${g} group=${g} />`)}
    <h2>Groups and their tools</h2>
    <div class="scroll"><table><thead><tr><th>Group</th><th>Tools its agent may call now</th></tr></thead><tbody>
      ${data.groups.map((g) => html`<tr><td>${g.group}</td><td class="mono">${g.tools.join(', ')}</td></tr>`)}
    </tbody></table></div>`;
}
