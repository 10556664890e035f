import { html, useState } from '/assets/vendor/preact-htm.js';
import { post, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

export function Agents() {
  const { data, error, reload } = useData('/api/agents', (e) => e.type === 'agent');
  const [problem, setProblem] = useState(null);
  const stop = (group) => post(`/api/agents/${encodeURIComponent(group)}/stop`).then(() => setProblem(null), (err) => setProblem(err.message)).then(reload);
  if (!data) return html`<h1>Agents</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>Agents</h1>
    ${(problem || error) && html`<div class="error">${problem || error}</div>`}
    <p class="muted">One agent container per group, started by a message and stopped after a while without one.</p>
    <div class="scroll"><table class="wide"><thead><tr><th>Group</th><th>State</th><th>Container</th><th>Since</th><th>Last turn</th><th>Model tokens today</th><th></th></tr></thead><tbody>
      ${data.agents.map((a) => html`<tr data-group=${a.group}><td>${a.group}</td><td class=${a.state === 'failed' ? 'bad' : a.state === 'working' ? 'warn' : ''}>${a.state}</td>
        <td class="mono">${a.container ? a.container.slice(0, 12) : '—'}</td><td>${when(a.since)}</td><td>${when(a.last_turn)}</td><td>${a.tokens_today}</td>
        <td>${a.container && html`<button class="danger" onClick=${() => stop(a.group)}>Stop</button>`}</td></tr>`)}
    </tbody></table></div>`;
}
