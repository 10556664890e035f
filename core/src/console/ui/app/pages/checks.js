import { html } from '/assets/vendor/preact-htm.js';
import { useData } from '/assets/pages/use-data.js';
import { Connections } from '/assets/pages/connections.js';

const MARK = { ok: '✓', warn: '!', fail: '✗' };
const CLASS = { ok: 'ok', warn: 'warn', fail: 'bad' };

/** The doctor's checks: model key, Telegram, Docker, agent image, plugins, disk; then the plugins' connection tests. */
export function Checks() {
  const { data, error, reload } = useData('/api/checks');
  return html`<h1>Checks</h1>
    <p class="muted">What the appliance needs to work, checked now. The same checks run as <code>make doctor</code>.</p>
    ${error && html`<div class="error">${error}</div>`}
    ${!data ? html`<p class="muted">Checking…</p>` : data.checks.map((c) => html`<div class="card check" data-status=${c.status} data-id=${c.id}>
      <div class="row"><strong class=${CLASS[c.status]}>${MARK[c.status]} ${c.title}</strong></div>
      <div>${c.detail}</div>${c.fix && html`<div class="hint">Fix: ${c.fix}</div>`}</div>`)}
    <button onClick=${reload}>Check again</button>
    <${Connections} />`;
}
