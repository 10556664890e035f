import { html, useState } from '/assets/vendor/preact-htm.js';
import { post, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

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
    <h2>Groups and their tools</h2>
    <div class="scroll"><table><thead><tr><th>Group</th><th>Tools its agent may call now</th></tr></thead><tbody>
      ${data.groups.map((g) => html`<tr><td>${g.group}</td><td class="mono">${g.tools.join(', ')}</td></tr>`)}
    </tbody></table></div>`;
}
