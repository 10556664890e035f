// The web chat page (served by the webchat plugin, mounted by the console at
// /plugins/webchat/): pick a group, write, see the agent's replies, its state, how long
// it has been working and the tools it calls as they happen (from the console's
// /api/events), stop a turn that runs away, and every error. Calls go through the
// console's own client (CSRF, a lost session, streams that reconnect and resume).
import { html, render, useEffect, useRef, useState } from '/assets/vendor/preact-htm.js';
import { bytes, follow, get, post } from '/assets/api.js';

const toolOf = (topic) => (topic && topic.startsWith('tool.invoke.') ? topic.slice(12) : null);
const WORKING = new Set(['starting', 'working']);

/** What an audit entry of this group's agent says about a tool call, if anything worth a line. */
function toolLine(e) {
  const tool = toolOf(e.topic);
  if (!tool) return null;
  if (e.stage === 'route' && e.outcome === 'routed') return `→ ${tool}`;
  if (e.stage === 'confirm' && e.outcome === 'pending') return `⏸ ${tool}: waiting for your approval (Approvals page)`;
  if (e.outcome === 'rejected' || e.outcome === 'error') return `✗ ${tool}: ${e.reason ?? e.code ?? e.outcome}`;
  if (e.stage === 'response' && e.outcome === 'ok') return `✓ ${tool}`;
  return null;
}

/** A file the agent sent (the core checked and keeps it): images shown, everything downloadable. */
function Attachment({ file }) {
  const url = `/api/files/${encodeURIComponent(file.id)}`;
  return html`<div class="file">
    ${file.inline && html`<img src=${url} alt=${file.name} />`}
    <a href=${url} download=${file.name}>⤓ ${file.name}</a> <span class="muted">${bytes(file.size)} · ${file.type.split(';')[0]}</span></div>`;
}

const seconds = (since, now) => Math.max(0, Math.round((now - Date.parse(since)) / 1000));
const duration = (s) => (s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`);

function Chat() {
  const [groups, setGroups] = useState([]);
  const [group, setGroup] = useState(new URLSearchParams(location.search).get('group') || '');
  const [messages, setMessages] = useState([]);
  const [tools, setTools] = useState([]);
  const [agent, setAgent] = useState({ state: '', since: null });
  const [now, setNow] = useState(Date.now());
  const [error, setError] = useState(null);
  const [offline, setOffline] = useState(false);
  const [text, setText] = useState('');
  const end = useRef(null);

  useEffect(() => {
    get('/api/groups').then((g) => {
      setGroups(g.groups.map((x) => x.group));
      setGroup((current) => current || g.groups[0]?.group || '');
    }, (err) => setError(err.message));
  }, []);

  useEffect(() => {
    if (!group) return undefined;
    history.replaceState(null, '', `?group=${encodeURIComponent(group)}`); // a reload or a new login comes back here
    setMessages([]);
    setTools([]);
    get('/api/agents').then((a) => {
      const mine = a.agents.find((x) => x.group === group);
      if (mine) setAgent({ state: mine.state, since: mine.since });
    }, () => undefined);
    // The whole kept history first (an unknown `since`), then each new message, once.
    // A `cleared` event: the person cleared the conversation (here, on another channel or in the console).
    const closeChat = follow(`./api/stream?group=${encodeURIComponent(group)}`, (m) => setMessages((old) => (m.cleared ? [] : old.some((o) => o.id === m.id) ? old : [...old, m])), {
      since: 'start',
      onState: (up) => setOffline(!up),
    });
    const closeLive = follow(`/api/events?group=${encodeURIComponent(group)}`, (e) => {
      if (e.type === 'agent') setAgent((old) => ({ state: e.state, since: WORKING.has(e.state) && WORKING.has(old.state) ? old.since : e.since }));
      const line = e.type === 'audit' ? toolLine(e) : null;
      if (line) setTools((old) => [...old.slice(-30), { id: `${e.timestamp}-${old.length}`, line }]);
    });
    return () => {
      closeChat();
      closeLive();
    };
  }, [group]);

  const working = WORKING.has(agent.state);
  useEffect(() => {
    if (!working) return undefined;
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(tick);
  }, [working]);

  useEffect(() => end.current?.scrollIntoView({ block: 'end' }), [messages, tools]);

  const send = async (event) => {
    event.preventDefault();
    const body = text.trim();
    if (!body) return;
    try {
      await post(`./api/send?group=${encodeURIComponent(group)}`, { text: body });
      setText('');
      setError(null);
    } catch (err) {
      setError(`not sent: ${err.message}`);
    }
  };
  const stop = () =>
    post(`/api/agents/${encodeURIComponent(group)}/stop`).then(
      (r) => setError(r.stopped ? null : 'nothing to stop: the agent was not running'),
      (err) => setError(`could not stop: ${err.message}`),
    );

  return html`<main class="page chat">
    <div class="row"><a href="/">← Console</a><h1>Web chat</h1>
      <select id="group" value=${group} onChange=${(e) => setGroup(e.target.value)}>${groups.map((g) => html`<option value=${g}>${g}</option>`)}</select>
      <span id="state" class=${working ? 'warn' : 'muted'}>${working ? 'working…' : agent.state || 'idle'}</span>
      ${working && agent.since && html`<span id="elapsed" class="muted">${duration(seconds(agent.since, now))}</span>`}
      ${working && html`<button id="stop" class="danger" type="button" onClick=${stop}>Stop</button>`}</div>
    ${offline && html`<div class="error" id="offline" role="status">Lost the connection to Carapace; reconnecting…</div>`}
    ${error && html`<div class="error" role="alert">${error}</div>`}
    <div class="card" id="messages">
      ${messages.length === 0 && html`<p class="muted">No messages yet. Write to the agent of group "${group}".</p>`}
      ${messages.map((m) => html`<div class=${`msg ${m.from}`} data-from=${m.from} data-id=${m.id}><span class="muted">${m.from === 'user' ? 'you' : m.from === 'agent' ? 'agent' : 'notice'} · ${new Date(m.at).toLocaleTimeString()}</span><pre>${m.text}</pre>${m.file && html`<${Attachment} file=${m.file} />`}</div>`)}
    </div>
    ${tools.length > 0 && html`<div class="card" id="tools"><div class="muted">Tools called</div>${tools.map((t) => html`<div class="mono tool">${t.line}</div>`)}</div>`}
    <form class="row" onSubmit=${send}>
      <input id="text" placeholder="Write to the agent…" value=${text} onInput=${(e) => setText(e.target.value)} maxlength="8000" />
      <button class="primary" type="submit" disabled=${!group}>Send</button>
    </form>
    <div ref=${end}></div>
  </main>`;
}

render(html`<${Chat} />`, document.getElementById('chat'));
