import { html, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { bytes, dollars, post, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

const STATE_CLASS = { healthy: 'ok', starting: 'warn', failed: 'bad' };
const stateOf = (p) => (p.category === 'NOT_CONFIGURED' ? 'not configured' : p.state === 'starting' ? 'starting (or plugin host away)' : p.state);

export function Overview() {
  const { data, error, reload } = useData('/api/overview', (e) => e.type === 'agent' || (e.type === 'audit' && (e.stage === 'plugin' || e.stage === 'core' || e.stage === 'confirm' || e.code === 'MODEL_REFUSED')));
  if (!data) return html`<h1>Overview</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  if (data.safe_mode) return html`<${SafeMode} problem=${data.safe_mode} reload=${reload} />`;
  const running = data.agents.filter((a) => a.state === 'working' || a.state === 'idle' || a.state === 'starting');
  return html`<h1>Overview</h1>
    ${error && html`<div class="error">${error}</div>`}
    ${data.config?.problem && html`<div class="card" id="config-problem"><div class="big bad">carapace.json is broken</div>
      <p><span class="mono">${data.config.problem.file}</span>, <strong>line ${data.config.problem.line}, column ${data.config.problem.column}</strong>${data.config.problem.pointer ? html` (<span class="mono pointer">${data.config.problem.pointer}</span>)` : ''}: ${data.config.problem.message}. ${data.config.problem.pointer ? 'Nothing of the file is taken until it is fixed: the plugin keeps its last good settings, or does not run if it had none.' : 'The configuration the core last took stays in force everywhere until it is fixed.'}</p></div>`}
    <div class="cards">
      <div class="card"><div class="muted">Core</div><div class="big ok">running</div><div class="muted">version ${data.version}, up ${Math.round(data.uptime_s / 60)} min</div></div>
      <div class="card"><div class="muted">Plugin host</div><div class="big ${data.plugin_host ? 'ok' : 'bad'}">${data.plugin_host ? 'linked' : 'away'}</div><div class="muted">${data.plugin_host ? 'runs the plugins' : 'its tools are unavailable: see docker compose logs plugins'}</div></div>
      ${data.model && html`<${ModelCard} model=${data.model} />`}
      <div class="card"><div class="muted">Agents running</div><div class="big">${running.length}</div><div class="muted">${running.map((a) => a.group).join(', ') || 'none'}</div></div>
      <div class="card"><div class="muted">Waiting for you</div><div class="big ${data.pending_confirmations ? 'warn' : ''}">${data.pending_confirmations}</div><div class="muted"><a href="#/approvals">approvals</a></div></div>
      <div class="card"><div class="muted">Audit log</div>
        <div class="big ${data.audit.ok ? 'ok' : 'bad'}">${data.audit.ok ? 'writing' : 'NOT writable'}</div>
        <div class="muted">${data.audit.ok ? `${data.audit.failures} write failures, ${data.audit.lost_entries} entries lost since start` : `since ${when(data.audit.down_since)}: tool calls are refused (${data.audit.last_error})`}</div></div>
      ${data.backups && html`<${Backups} b=${data.backups} />`}
    </div>
    <h2>Plugins</h2>
    <div class="scroll"><table><thead><tr><th>Plugin</th><th>State</th><th>Problem</th></tr></thead><tbody>
      ${data.plugins.map((p) => html`<tr><td>${p.name}</td><td class=${p.refusing ? 'bad' : p.category === 'NOT_CONFIGURED' ? 'muted' : STATE_CLASS[p.state] ?? ''}>${p.refusing ? 'messages refused' : stateOf(p)}</td><td class="problem">${p.category === 'NOT_CONFIGURED' ? '' : p.category ?? ''}${p.refusing ? html`<${Held} plugin=${p.name} why=${p.refusing} reload=${reload} />` : ''}${p.detail && p.category !== 'NOT_CONFIGURED' ? html`<div class="muted">${p.detail}</div>` : ''}</td></tr>`)}
    </tbody></table></div>
    <h2>Disk</h2>
    <div class="scroll"><table><thead><tr><th>Folder</th><th>Used</th><th>Free on its disk</th></tr></thead><tbody>
      ${data.disk.map((d) => html`<tr><td>${d.name} <span class="muted mono">${d.path}</span></td><td>${d.partial ? '≥ ' : ''}${bytes(d.bytes)}</td><td class=${d.claims && d.free !== null && d.claims > d.free ? 'bad' : ''}>${d.free === null ? '—' : bytes(d.free)}${d.claims ? ` (new workspaces may still claim ${bytes(d.claims)})` : ''}</td></tr>`)}
    </tbody></table></div>
    <h2>Model budgets today</h2>
    <div class="scroll"><table><thead><tr><th>Group</th><th>Tokens used</th><th>Left today</th><th>Cost</th><th>Requests this minute</th></tr></thead><tbody>
      ${data.budgets.map((b) => html`<tr><td>${b.group}</td><td>${b.tokens}</td><td class=${b.tokens >= b.tokens_per_day ? 'bad' : ''}>${Math.max(0, b.tokens_per_day - b.tokens)}</td><td>${dollars(b.cost_micros)}${b.usd_per_day === undefined ? '' : ` of ${dollars(b.usd_per_day * 1e6)}`}</td><td>${b.requests_this_minute} / ${b.requests_per_minute}</td></tr>`)}
    </tbody></table></div>`;
}

/** Messages the configuration does not allow, kept for it: the person may let them go instead. */
function Held({ plugin, why, reload }) {
  const [error, setError] = useState(null);
  const discard = () => {
    if (!confirm(`Discard the messages held for ${plugin}? They will never be handled.`)) return;
    post(`/api/held/${encodeURIComponent(plugin)}/discard`).then(reload, (err) => setError(err.message));
  };
  return html`<div class="bad refusing">${why} <button class="discard-held" onClick=${discard}>Discard them</button>${error && html`<div class="error">${error}</div>`}</div>`;
}

/** The last backup: when, and whether it worked (what failed and why); the schedule. */
function Backups({ b }) {
  const last = b.last;
  const state = !last ? (b.running ? 'running' : 'none yet') : last.ok ? 'made' : 'FAILED';
  const schedule = b.schedule === 'daily' ? `daily at ${b.at} UTC${b.next_at ? `, next ${when(b.next_at)}` : ''}` : 'not scheduled: make backup';
  return html`<div class="card" id="backups"><div class="muted">Last backup</div>
    <div class="big ${!last ? 'warn' : last.ok ? 'ok' : 'bad'}">${state}</div>
    <div class="muted">${last ? (last.ok ? `${when(last.at)}, ${last.files} files, ${bytes(last.bytes)}` : html`${when(last.at)}: <code>${last.code}</code> ${last.message}${b.last_ok_at ? ` (last good ${when(b.last_ok_at)})` : ''}`) : ''}</div>
    <div class="muted">${schedule}</div></div>`;
}

/**
 * The model API as the LLM proxy last found it: answering (green), refusing the key (red),
 * or not asked since the core started (neutral: nothing is known yet, good or bad).
 */
function ModelCard({ model }) {
  const state = !model.ok ? 'refused' : model.last_ok ? 'answering' : 'not-asked';
  const words = { answering: ['ok', 'answering'], refused: ['bad', 'REFUSED'], 'not-asked': ['neutral', 'not asked yet'] }[state];
  return html`<div class="card" id="model" data-state=${state}><div class="muted">Model API</div>
    <div class="big ${words[0]}">${words[1]}</div>
    ${state === 'answering' && html`<div class="muted">last answer ${when(model.last_ok)}</div>`}
    ${state === 'refused' && html`<div class="muted">since ${when(model.problem.since)}: ${model.problem.message}</div>`}
    ${state === 'not-asked' && html`<div class="hint">No agent has asked it since the core started, so whether it takes the key is not known yet: <a href="#/checks">Checks</a> tests the key now.</div>`}</div>`;
}

/** carapace.json is broken: what is wrong and where; looked at again until the core runs. */
function SafeMode({ problem, reload }) {
  useEffect(() => {
    const again = setInterval(reload, 3000);
    return () => clearInterval(again);
  }, []);
  return html`<h1>Overview</h1>
    <div class="card" id="safe-mode"><div class="big bad">Safe mode: carapace.json is broken</div>
      <p><span class="mono">${problem.file}</span>, <strong>line ${problem.line}, column ${problem.column}</strong>${problem.field ? html` (<span class="mono">${problem.field}</span>)` : ''}: ${problem.message}.</p>
      <p>Nothing runs until it is fixed: no agent starts and no plugin acts. Fix the file; the core takes it within a second (or run <code>docker compose restart</code>). This page follows by itself.</p></div>`;
}
