import { html } from '/assets/vendor/preact-htm.js';
import { useData } from '/assets/pages/use-data.js';

export function Groups() {
  const { data, error } = useData('/api/groups');
  if (!data) return html`<h1>Groups & channels</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>Groups & channels</h1>
    <h2>Chats</h2>
    ${data.chats.length === 0 ? html`<p class="muted">No chat is mapped to a group.</p>` : html`
    <table><thead><tr><th>Channel</th><th>Chat</th><th>Group</th></tr></thead><tbody>
      ${data.chats.map((c) => html`<tr><td>${c.plugin}</td><td class="mono">${c.chat}</td><td>${c.group}</td></tr>`)}
    </tbody></table>`}
    <h2>Groups and their tools</h2>
    <table><thead><tr><th>Group</th><th>Tools its agent may call now</th></tr></thead><tbody>
      ${data.groups.map((g) => html`<tr><td>${g.group}</td><td class="mono">${g.tools.join(', ')}</td></tr>`)}
    </tbody></table>`;
}
