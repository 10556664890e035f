// The Checks page's connection tests: for each configured plugin that talks to a server
// (its manifest offers a connection check), a button that tests it now, in the plugin's own
// process, and what came of it: per server, passed or the step that failed (the name, the
// connection, TLS, the login, the listing) and the server's own words. Every text is a text
// child of the template (htm escapes it): a server's words never become markup here.
import { html, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { get, post, when } from '/assets/api.js';

const STEP = { dns: 'DNS (the server\'s name)', connect: 'connecting', tls: 'TLS', login: 'login', listing: 'listing' };

function Result({ r }) {
  return html`<div class="connection-result" data-ok=${String(r.ok)} data-step=${r.step}>
    <strong class=${r.ok ? 'ok' : 'bad'}>${r.ok ? '✓' : '✗'} ${r.name}</strong>
    <span class="step">${r.ok ? ' passed' : ` failed at: ${STEP[r.step] ?? r.step}`}</span>
    <div class="server-words mono">${r.message}</div></div>`;
}

function Connection({ row, busy, test }) {
  const last = row.last;
  const status = !last ? 'none' : last.ok ? 'ok' : 'fail';
  return html`<div class="card check connection" data-plugin=${row.plugin} data-status=${status}>
    <div class="row"><strong>Plugin ${row.plugin}</strong>
      <button class="test-connection" disabled=${busy || row.running} onClick=${() => test(row.plugin)}>${busy || row.running ? 'Testing…' : 'Test connection'}</button></div>
    ${!last && html`<div class="muted">Not tested yet.</div>`}
    ${last && last.error && html`<div class="bad connection-error">✗ ${last.error}</div>`}
    ${last && last.results.map((r) => html`<${Result} r=${r} />`)}
    ${last && html`<div class="hint">Tested ${when(last.at)}.</div>`}</div>`;
}

export function Connections() {
  const [rows, setRows] = useState([]);
  const [busy, setBusy] = useState({});
  const [error, setError] = useState(null);
  // Safe mode answers no plugin anything: the section is simply not there.
  const load = () => get('/api/connection-checks').then((r) => setRows(r.checks), () => setRows([]));
  useEffect(() => void load(), []);
  const test = async (plugin) => {
    setBusy((b) => ({ ...b, [plugin]: true }));
    setError(null);
    try {
      await post(`/api/connection-checks/${encodeURIComponent(plugin)}`);
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy((b) => ({ ...b, [plugin]: false }));
      await load();
    }
  };
  if (rows.length === 0) return null;
  return html`<h2 id="connections">Connections</h2>
    <p class="muted">Whether each plugin reaches its server and is let in, tested now from the plugin's own process (its passwords never leave it). Nothing is sent or changed.</p>
    ${error && html`<div class="error">${error}</div>`}
    ${rows.map((row) => html`<${Connection} row=${row} busy=${busy[row.plugin] === true} test=${test} />`)}`;
}
