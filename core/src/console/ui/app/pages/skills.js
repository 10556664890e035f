import { html } from '/assets/vendor/preact-htm.js';
import { useData } from '/assets/pages/use-data.js';

function network(s) {
  if (s.public && s.hosts.length > 0) return `any public address, and ${s.hosts.join(', ')}`;
  if (s.public) return 'any host at a public address (never the local network)';
  return s.hosts.length > 0 ? s.hosts.join(', ') : 'none';
}

/** Each skill: where it comes from, what it may reach and which secrets it receives (only in its own sandbox). */
export function Skills() {
  const { data, error } = useData('/api/skills');
  return html`<h1>Skills</h1>
    <p class="muted">What the agent can run beside its own programs, each in a sandbox of its own. Network and secrets are the skill's alone: the agent never has them. A skill the agent proposes appears here only after your yes (Approvals).</p>
    ${error && html`<div class="error">${error}</div>`}
    ${!data ? html`<p class="muted">Loading…</p>` : data.skills.length === 0 ? html`<p class="muted">No skills.</p>` : html`<table class="skills">
      <tr><th>Skill</th><th>Network</th><th>Secrets</th><th>Image</th></tr>
      ${data.skills.map((s) => html`<tr data-skill=${s.name} data-origin=${s.origin} class=${s.problem ? 'refused' : ''}>
        <td><strong>${s.name}</strong> <span class="muted">${s.origin === 'own' ? 'yours' : 'bundled'}</span><div>${s.description}</div>${s.problem && html`<div class="bad">Not offered: ${s.problem}</div>`}</td>
        <td class="network">${network(s)}</td>
        <td class="secrets">${s.secrets.length === 0 ? 'none' : s.secrets.map((x) => html`<div><code>${x.name}</code> ${x.set ? html`<span class="ok">set</span>` : html`<span class="warn">not set in .env</span>`}</div>`)}</td>
        <td>${s.dockerfile ? 'its own Dockerfile' : 'the sandbox image'}</td></tr>`)}
    </table>`}`;
}
