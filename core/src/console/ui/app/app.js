// The console's shell: navigation, a hash router, and the pages (pages/*.js).
// Preact + htm from the core (/assets/vendor): no build step, nothing from the internet.
import { html, render, useEffect, useState } from '/assets/vendor/preact-htm.js';
import { get, onLive, post } from '/assets/api.js';
import { Overview } from '/assets/pages/overview.js';
import { Approvals } from '/assets/pages/approvals.js';
import { Activity } from '/assets/pages/activity.js';
import { Agents } from '/assets/pages/agents.js';
import { Usage } from '/assets/pages/usage.js';
import { Groups } from '/assets/pages/groups.js';
import { Checks } from '/assets/pages/checks.js';
import { Skills } from '/assets/pages/skills.js';

const PAGES = [
  ['overview', 'Overview', Overview],
  ['approvals', 'Approvals', Approvals],
  ['activity', 'Activity', Activity],
  ['agents', 'Agents', Agents],
  ['usage', 'Usage', Usage],
  ['groups', 'Groups & channels', Groups],
  ['skills', 'Skills', Skills],
  ['checks', 'Checks', Checks],
];

function route() {
  const [name, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  return { name: PAGES.some(([n]) => n === name) ? name : 'overview', arg: rest.join('/') };
}

function App() {
  const [at, setAt] = useState(route());
  const [pending, setPending] = useState(0);
  const [panels, setPanels] = useState([]);
  useEffect(() => {
    const onHash = () => setAt(route());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  useEffect(() => {
    const count = () => get('/api/confirmations').then((c) => setPending(c.pending.length), () => undefined);
    count();
    get('/api/groups').then((g) => setPanels(g.panels), () => undefined);
    return onLive((e) => e.type === 'audit' && e.stage === 'confirm' && count());
  }, []);
  const logout = async (event) => {
    event.preventDefault();
    await post('/logout').catch(() => undefined);
    location.assign('/login');
  };
  const Page = PAGES.find(([n]) => n === at.name)[2];
  return html`<div class="shell">
    <nav>
      <div class="brand">Carapace</div>
      <div class="links">
        ${PAGES.map(([n, title]) => html`<a href=${`#/${n}`} class=${n === at.name ? 'active' : ''}>${title}${n === 'approvals' && pending > 0 ? html`<span class="badge">${pending}</span>` : ''}</a>`)}
        ${panels.length > 0 && html`<div class="section">Plugins</div>`}
        ${panels.map((p) => html`<a href=${`/plugins/${encodeURIComponent(p.name)}/`}>${p.title}</a>`)}
      </div>
      <form onSubmit=${logout}><button type="submit">Log out</button></form>
    </nav>
    <main class="page"><${Page} arg=${at.arg} /></main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
