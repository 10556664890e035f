import { html, useState } from '/assets/vendor/preact-htm.js';
import { del, post, when } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

export function Approvals() {
  const { data, error, reload } = useData('/api/confirmations', (e) => e.type === 'audit' && e.stage === 'confirm');
  const [problem, setProblem] = useState(null);
  const act = (promise) => promise.then(() => setProblem(null), (err) => setProblem(err.message)).then(reload);
  // The answer names the hash of the description shown: the core refuses it for anything else.
  const answer = (p, decision, hours) =>
    act(post(`/api/confirmations/${encodeURIComponent(p.id)}/${decision}`, { ...(hours ? { allow_hours: hours } : {}), ...(p.description ? { hash: p.description.hash } : {}) }));
  if (!data) return html`<h1>Approvals</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>Approvals</h1>
    ${(problem || error) && html`<div class="error">${problem || error}</div>`}
    <h2>Waiting for you</h2>
    ${data.pending.length === 0 ? html`<p class="muted">Nothing is waiting. High-risk tool calls appear here (and in Telegram) until someone answers or they expire.</p>` : ''}
    ${data.pending.map((p) => html`<${Pending} p=${p} answer=${answer} />`)}
    <h2>Standing approvals</h2>
    ${data.standing.length === 0 ? html`<p class="muted">None. An approval can stand for a tool with exactly the same arguments in one group, for up to 7 days, a set number of times an hour (once, unless you say more).</p>` : html`
    <div class="scroll"><table class="wide"><thead><tr><th>Group</th><th>Tool</th><th>Arguments</th><th>By</th><th>Until</th><th>Uses</th><th></th></tr></thead><tbody>
      ${data.standing.map((s) => html`<tr><td>${s.group}</td><td>${s.tool}</td><td><pre>${JSON.stringify(s.arguments)}</pre>${s.state && s.state.length > 0 && html`<div class="muted">while it refers to:</div><pre class="state">${s.state.join('\n')}</pre>`}</td><td>${s.created_by}</td><td>${when(s.expires_at)}</td><td>${s.uses_per_hour} an hour (${s.used_at.length} in the last hour)</td>
        <td><button class="danger" onClick=${() => act(del(`/api/standing/${encodeURIComponent(s.id)}`))}>Revoke</button></td></tr>`)}
    </tbody></table></div>`}`;
}

/** A proposal's files the core took from the workspace (propose_write `from`): kept, shown as they are. */
function takenFiles(p) {
  const files = p.tool === 'propose_write' && Array.isArray(p.arguments?.files) ? p.arguments.files : [];
  return files.filter((f) => f && typeof f.path === 'string' && typeof f.taken?.id === 'string' && typeof f.taken.type === 'string');
}

/**
 * One waiting call, from the core's description (core/src/confirm/describe-call.ts): the
 * warnings first, then tool, group and one escaped line per argument next to the buttons,
 * each text with lines (a proposed file) whole in a box of its own, escaped; the complete
 * escaped arguments folded away, in a box of bounded height.
 */
function Pending({ p, answer }) {
  const d = p.description ?? { warnings: [], summary: [], full: JSON.stringify(p.arguments, null, 2), summary_cut: true };
  return html`<div class="card pending" data-id=${p.id} data-hash=${d.hash ?? ''}>
    ${d.warnings.length > 0 && html`<ul class="warnings">${d.warnings.map((w) => html`<li>⚠ ${w}</li>`)}</ul>`}
    <div class="row"><strong>${p.tool}</strong><span class="muted">group ${p.group} · asked ${when(p.requested_at)} · expires ${when(p.expires_at)}</span></div>
    <pre class="args">${d.summary.length > 0 ? d.summary.join('\n') : '(no arguments)'}</pre>
    ${d.state && d.state.length > 0 && html`<div class="muted">What it refers to now:</div><pre class="args state">${d.state.join('\n')}</pre>`}
    ${(d.texts ?? []).map((t) => html`<div class="text"><div class="muted">${t.field}</div><pre class="args">${t.text}</pre></div>`)}
    ${takenFiles(p).map((f) => html`<div class="taken"><div class="muted">${f.path}: ${f.taken.type}, ${f.taken.size.toLocaleString('en-US')} bytes, the very bytes that would be written</div>
      ${f.taken.type.startsWith('image/') ? html`<img src=${`/api/files/${encodeURIComponent(f.taken.id)}`} alt=${f.path} />` : html`<a href=${`/api/files/${encodeURIComponent(f.taken.id)}`}>Download it to look at it</a>`}</div>`)}
    ${d.summary_cut && html`<details class="full"><summary>The complete arguments (${d.full.length.toLocaleString('en-US')} characters, escaped)</summary><pre>${d.full}</pre></details>`}
    <div class="row actions">
      <button class="primary approve" onClick=${() => answer(p, 'approve')}>Approve</button>
      <button class="deny" onClick=${() => answer(p, 'deny')}>Deny</button>
      <button class="allow" onClick=${() => answer(p, 'approve', 24)}>Approve + allow exactly this, once an hour, for 24 h</button>
    </div></div>`;
}
