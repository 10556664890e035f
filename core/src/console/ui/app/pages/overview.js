import { html } from '/assets/vendor/preact-htm.js';
import { bytes, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

const STATE_CLASS = { healthy: 'ok', starting: 'warn', failed: 'bad' };
const stateOf = (p) => (p.category === 'NOT_CONFIGURED' ? 'not configured' : p.state === 'starting' ? 'starting (or plugin host away)' : p.state);

export function Overview() {
  const { data, error } = useData('/api/overview', (e) => e.type === 'agent' || (e.type === 'audit' && (e.stage === 'plugin' || e.stage === 'confirm')));
  if (!data) return html`<h1>Overview</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  const running = data.agents.filter((a) => a.state === 'working' || a.state === 'idle' || a.state === 'starting');
  return html`<h1>Overview</h1>
    ${error && html`<div class="error">${error}</div>`}
    <div class="cards">
      <div class="card"><div class="muted">Core</div><div class="big ok">running</div><div class="muted">version ${data.version}, up ${Math.round(data.uptime_s / 60)} min</div></div>
      <div class="card"><div class="muted">Plugin host</div><div class="big ${data.plugin_host ? 'ok' : 'bad'}">${data.plugin_host ? 'linked' : 'away'}</div><div class="muted">${data.plugin_host ? 'runs the plugins' : 'its tools are unavailable: see docker compose logs plugins'}</div></div>
      <div class="card"><div class="muted">Agents running</div><div class="big">${running.length}</div><div class="muted">${running.map((a) => a.group).join(', ') || 'none'}</div></div>
      <div class="card"><div class="muted">Waiting for you</div><div class="big ${data.pending_confirmations ? 'warn' : ''}">${data.pending_confirmations}</div><div class="muted"><a href="#/approvals">approvals</a></div></div>
      <div class="card"><div class="muted">Audit log</div>
        <div class="big ${data.audit.ok ? 'ok' : 'bad'}">${data.audit.ok ? 'writing' : 'NOT writable'}</div>
        <div class="muted">${data.audit.ok ? `${data.audit.failures} write failures, ${data.audit.lost_entries} entries lost since start` : `since ${when(data.audit.down_since)}: tool calls are refused (${data.audit.last_error})`}</div></div>
    </div>
    <h2>Plugins</h2>
    <div class="scroll"><table><thead><tr><th>Plugin</th><th>State</th><th>Problem</th></tr></thead><tbody>
      ${data.plugins.map((p) => html`<tr><td>${p.name}</td><td class=${p.category === 'NOT_CONFIGURED' ? 'muted' : STATE_CLASS[p.state] ?? ''}>${stateOf(p)}</td><td>${p.category === 'NOT_CONFIGURED' ? '' : p.category ?? ''}</td></tr>`)}
    </tbody></table></div>
    <h2>Disk</h2>
    <div class="scroll"><table><thead><tr><th>Folder</th><th>Used</th><th>Free on its disk</th></tr></thead><tbody>
      ${data.disk.map((d) => html`<tr><td>${d.name} <span class="muted mono">${d.path}</span></td><td>${d.partial ? '≥ ' : ''}${bytes(d.bytes)}</td><td>${d.free === null ? '—' : bytes(d.free)}</td></tr>`)}
    </tbody></table></div>
    <h2>Model budgets today</h2>
    <div class="scroll"><table><thead><tr><th>Group</th><th>Tokens used</th><th>Left today</th><th>Requests this minute</th></tr></thead><tbody>
      ${data.budgets.map((b) => html`<tr><td>${b.group}</td><td>${b.tokens}</td><td class=${b.tokens >= b.tokens_per_day ? 'bad' : ''}>${Math.max(0, b.tokens_per_day - b.tokens)}</td><td>${b.requests_this_minute} / ${b.requests_per_minute}</td></tr>`)}
    </tbody></table></div>`;
}
