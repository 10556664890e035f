import { html, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { get, onLive } from '/assets/api.js';

const MAX_ROWS = 500;
const toolOf = (topic) => (topic?.startsWith('tool.invoke.') ? topic.slice(12) : '');

/** The audit log, live; filtered by group, tool, outcome; a row opens its correlation's trail. */
export function Activity({ arg }) {
  const [filter, setFilter] = useState({ group: '', tool: '', outcome: '' });
  const [rows, setRows] = useState([]);
  const [trail, setTrail] = useState(null);
  const [error, setError] = useState(null);
  const matches = (e) => (!filter.group || e.group === filter.group) && (!filter.tool || toolOf(e.topic) === filter.tool) && (!filter.outcome || e.outcome === filter.outcome);
  useEffect(() => {
    const query = new URLSearchParams(Object.entries(filter).filter(([, v]) => v));
    get(`/api/audit?${query}`).then((r) => setRows(r.entries.reverse()), (err) => setError(err.message));
    return onLive((e) => e.type === 'audit' && matches(e) && setRows((old) => [e, ...old].slice(0, MAX_ROWS)));
  }, [filter.group, filter.tool, filter.outcome]);
  useEffect(() => {
    if (!arg) return setTrail(null);
    get(`/api/audit?correlation=${encodeURIComponent(arg)}&limit=1000`).then((r) => setTrail(r.entries), (err) => setError(err.message));
  }, [arg]);
  const field = (name, placeholder) => html`<input placeholder=${placeholder} value=${filter[name]} onChange=${(ev) => setFilter({ ...filter, [name]: ev.target.value.trim() })} />`;
  return html`<h1>Activity</h1>
    ${error && html`<div class="error">${error}</div>`}
    ${trail && html`<div class="card trail"><div class="row"><strong>Trail of ${arg}</strong><a href="#/activity">close</a></div>
      <div class="scroll"><table class="wide"><tbody>${trail.map((e) => html`<tr><td class="mono">${e.timestamp}</td><td>${e.stage}</td><td class=${e.outcome}>${e.outcome}</td><td>${e.reason ?? ''}${e.code ? ` (${e.code})` : ''}</td></tr>`)}</tbody></table></div></div>`}
    <div class="row filters">${field('group', 'group')} ${field('tool', 'tool')}
      <select value=${filter.outcome} onChange=${(ev) => setFilter({ ...filter, outcome: ev.target.value })}>
        <option value="">any outcome</option>${['passed', 'routed', 'rejected', 'sanitized', 'error', 'ok', 'dropped', 'pending'].map((o) => html`<option value=${o}>${o}</option>`)}
      </select><span class="muted">live · newest first</span></div>
    <div class="scroll"><table class="activity wide"><thead><tr><th>Time</th><th>Group</th><th>Source</th><th>Topic</th><th>Stage</th><th>Outcome</th><th>Reason</th></tr></thead><tbody>
      ${rows.map((e) => html`<tr class=${e.correlation ? 'clickable' : ''} data-correlation=${e.correlation ?? ''} onClick=${() => e.correlation && (location.hash = `#/activity/${e.correlation}`)}>
        <td class="mono">${e.timestamp.slice(11, 23)}</td><td>${e.group ?? ''}</td><td>${e.source}</td><td class="mono">${e.topic ?? ''}</td><td>${e.stage}</td>
        <td class=${e.outcome === 'error' || e.outcome === 'rejected' ? 'bad' : e.outcome === 'pending' ? 'warn' : ''}>${e.outcome}</td><td>${e.reason ?? ''}${e.code ? ` (${e.code})` : ''}</td></tr>`)}
    </tbody></table></div>`;
}
