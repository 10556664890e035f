// The memory page (served by the memory plugin, mounted by the console at /plugins/memory/):
// per group, search, read an entry with its provenance, delete.
import { html, render, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { GroupSelect, usePanelGroups } from '/assets/panel-groups.js';
import { get, post } from '/assets/api.js';

function Memory() {
  const [query, setQuery] = useState('');
  const [superseded, setSuperseded] = useState(false);
  const [results, setResults] = useState([]);
  const [open, setOpen] = useState(null);
  const [error, setError] = useState(null);
  const [groups, group, setGroup] = usePanelGroups(setError);
  const q = (path) => `./api/${path}${path.includes('?') ? '&' : '?'}group=${encodeURIComponent(group)}`;

  const search = () => group && get(q(`search?q=${encodeURIComponent(query)}${superseded ? '&superseded=1' : ''}`)).then((r) => (setResults(r.results), setError(null)), (err) => setError(err.message));
  useEffect(() => void search(), [group, superseded]);

  const show = (id) => get(q(`entry?id=${encodeURIComponent(id)}`)).then((r) => setOpen(r.entry), (err) => setError(err.message));
  const remove = async (id) => {
    if (!confirm('Delete this memory? The agent will no longer know it.')) return;
    try {
      await post(q('delete'), { id });
      setOpen(null);
      await search();
    } catch (err) {
      setError(`not deleted: ${err.message}`);
    }
  };

  return html`<main class="page">
    <div class="row"><a href="/">← Console</a><h1 style="margin:0 12px">Memory</h1>
      <${GroupSelect} groups=${groups} group=${group} setGroup=${setGroup} /></div>
    ${error && html`<div class="error" role="alert">${error}</div>`}
    ${groups.length === 0 && html`<p class="muted">No group has stored a memory yet.</p>`}
    <form class="row" style="margin:12px 0" onSubmit=${(e) => (e.preventDefault(), search())}>
      <input id="query" style="flex:1" placeholder="search words (empty: the newest)" value=${query} onInput=${(e) => setQuery(e.target.value)} />
      <label><input type="checkbox" checked=${superseded} onChange=${(e) => setSuperseded(e.target.checked)} /> include replaced ones</label>
      <button class="primary" type="submit">Search</button>
    </form>
    ${open && html`<div class="card entry" data-id=${open.id}>
      <div class="row"><strong>${open.type}</strong>${open.behavioral && html`<span class="warn">shapes behaviour</span>`}${open.provenance.external && html`<span class="warn external">after external content</span>`}<span class="muted mono">${open.id}</span></div>
      ${open.provenance.external && html`<p class="warn external-note">Stored by a session that had read text from outside (a mail, a web page): it may repeat what a stranger wrote. Every brief shows it as such, never as yours.</p>`}
      <pre>${open.content}</pre>
      <div class="muted">tags: ${open.tags.join(', ') || '—'}${open.superseded_by ? ` · replaced by ${open.superseded_by}` : ''}${open.supersedes ? ` · replaces ${open.supersedes}` : ''}</div>
      <div class="muted provenance">stored ${new Date(open.provenance.timestamp).toLocaleString()} by session ${open.provenance.session_id}${open.provenance.correlation ? html`, call <a href=${`/#/activity/${open.provenance.correlation}`}>${open.provenance.correlation}</a>` : ''}</div>
      <div class="row" style="margin-top:8px"><button class="danger delete" onClick=${() => remove(open.id)}>Delete</button><button onClick=${() => setOpen(null)}>Close</button></div>
    </div>`}
    <table id="results"><thead><tr><th>Stored</th><th>Type</th><th>Memory</th><th>Tags</th></tr></thead><tbody>
      ${results.map((r) => html`<tr class="clickable" data-id=${r.id} onClick=${() => show(r.id)}><td>${new Date(r.created_at).toLocaleDateString()}</td><td>${r.type}${r.provenance.external ? html` <span class="warn external">external</span>` : ''}</td><td>${r.content}</td><td class="mono">${r.tags.join(', ')}</td></tr>`)}
    </tbody></table>
  </main>`;
}

render(html`<${Memory} />`, document.getElementById('memory'));
