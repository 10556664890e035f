import { html } from '/assets/vendor/preact-htm.js';
import { dollars } from '/assets/api.js';
import { useData } from '/assets/pages/use-data.js';

export function Usage() {
  const { data, error } = useData('/api/usage?days=14');
  if (!data) return html`<h1>Usage</h1>${error ? html`<div class="error">${error}</div>` : html`<p class="muted">Loading…</p>`}`;
  const total = data.usage.reduce((n, u) => n + u.input_tokens + u.output_tokens, 0);
  const cost = data.usage.reduce((n, u) => n + u.cost_micros, 0);
  const unpriced = data.usage.reduce((n, u) => n + (u.unpriced_tokens ?? 0), 0);
  // Tokens from before usage was priced: their cost was never recorded, which is not $0.00.
  const costOf = (u) => (u.unpriced_tokens > 0 ? (u.cost_micros > 0 ? `${dollars(u.cost_micros)} + not recorded` : 'not recorded') : dollars(u.cost_micros));
  return html`<h1>Usage</h1>
    <p class="muted">Model tokens per group per day (UTC), counted by the core's model proxy: the last ${data.days} days, ${total} tokens in all, ${dollars(cost)} at the prices in carapace.json (llm.prices)${unpriced > 0 ? `; the cost of ${unpriced} tokens spent before this version priced usage was not recorded` : ''}.</p>
    ${data.usage.length === 0 ? html`<p class="muted">No model requests yet.</p>` : html`
    <div class="scroll"><table><thead><tr><th>Day</th><th>Group</th><th>Input tokens</th><th>Output tokens</th><th>Cost</th><th>Requests</th></tr></thead><tbody>
      ${data.usage.map((u) => html`<tr><td>${u.day}</td><td>${u.group}</td><td>${u.input_tokens}</td><td>${u.output_tokens}</td><td class=${u.unpriced_tokens > 0 ? 'muted' : ''}>${costOf(u)}</td><td>${u.requests}</td></tr>`)}
    </tbody></table></div>`}`;
}
