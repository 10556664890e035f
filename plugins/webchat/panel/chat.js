// The web chat page (served by the webchat plugin, mounted by the console at
// /plugins/webchat/): pick a group, write, see the agent's replies, its state and the
// tools it calls as they happen (from the console's /api/events), and every error.
import { html, render, useEffect, useRef, useState } from '/assets/vendor/preact-htm.js';

let csrf = null;
async function call(path, options = {}) {
  const headers = { ...(options.body ? { 'content-type': 'application/json' } : {}) };
  if (options.method === 'POST') {
    csrf ??= (await call('/api/csrf')).token;
    headers['x-csrf-token'] = csrf;
  }
  const res = await fetch(path, { ...options, headers, credentials: 'same-origin' });
  if (res.status === 401) location.assign('/login');
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.message || `the core answered ${res.status}`);
  return body;
}

const toolOf = (topic) => (topic && topic.startsWith('tool.invoke.') ? topic.slice(12) : null);

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

function Chat() {
  const [groups, setGroups] = useState([]);
  const [group, setGroup] = useState(new URLSearchParams(location.search).get('group') || '');
  const [messages, setMessages] = useState([]);
  const [tools, setTools] = useState([]);
  const [state, setState] = useState('');
  const [error, setError] = useState(null);
  const [text, setText] = useState('');
  const end = useRef(null);

  useEffect(() => {
    call('/api/groups').then((g) => {
      setGroups(g.groups.map((x) => x.group));
      setGroup((current) => current || g.groups[0]?.group || '');
    }, (err) => setError(err.message));
  }, []);

  useEffect(() => {
    if (!group) return undefined;
    setMessages([]);
    setTools([]);
    call(`./api/history?group=${encodeURIComponent(group)}`).then((h) => setMessages(h.messages), (err) => setError(err.message));
    const chat = new EventSource(`./api/stream?group=${encodeURIComponent(group)}`);
    chat.onmessage = (m) => setMessages((old) => [...old, JSON.parse(m.data)]);
    chat.onerror = () => setError('lost the chat stream; reconnecting…');
    chat.onopen = () => setError(null);
    const live = new EventSource(`/api/events?group=${encodeURIComponent(group)}`);
    live.onmessage = (m) => {
      const e = JSON.parse(m.data);
      if (e.type === 'agent') setState(e.state);
      const line = e.type === 'audit' ? toolLine(e) : null;
      if (line) setTools((old) => [...old.slice(-30), { id: `${e.timestamp}-${old.length}`, line, at: e.timestamp }]);
    };
    return () => {
      chat.close();
      live.close();
    };
  }, [group]);

  useEffect(() => end.current?.scrollIntoView({ block: 'end' }), [messages, tools]);

  const send = async (event) => {
    event.preventDefault();
    const body = text.trim();
    if (!body) return;
    try {
      await call(`./api/send?group=${encodeURIComponent(group)}`, { method: 'POST', body: JSON.stringify({ text: body }) });
      setText('');
      setError(null);
    } catch (err) {
      setError(`not sent: ${err.message}`);
    }
  };

  const working = state === 'starting' || state === 'working';
  return html`<main class="page chat">
    <div class="row"><a href="/">← Console</a><h1 style="margin:0 12px">Web chat</h1>
      <select id="group" value=${group} onChange=${(e) => setGroup(e.target.value)}>${groups.map((g) => html`<option value=${g}>${g}</option>`)}</select>
      <span id="state" class=${working ? 'warn' : 'muted'}>${working ? 'working…' : state || 'idle'}</span></div>
    ${error && html`<div class="error" role="alert">${error}</div>`}
    <div class="card" id="messages">
      ${messages.length === 0 && html`<p class="muted">No messages yet. Write to the agent of group "${group}".</p>`}
      ${messages.map((m) => html`<div class=${`msg ${m.from}`} data-from=${m.from}><span class="muted">${m.from === 'user' ? 'you' : m.from === 'agent' ? 'agent' : 'notice'} · ${new Date(m.at).toLocaleTimeString()}</span><pre>${m.text}</pre></div>`)}
    </div>
    ${tools.length > 0 && html`<div class="card" id="tools"><div class="muted">Tools called</div>${tools.map((t) => html`<div class="mono tool">${t.line}</div>`)}</div>`}
    <form class="row" onSubmit=${send}>
      <input id="text" style="flex:1" placeholder="Write to the agent…" value=${text} onInput=${(e) => setText(e.target.value)} maxlength="8000" />
      <button class="primary" type="submit" disabled=${!group}>Send</button>
    </form>
    <div ref=${end}></div>
  </main>`;
}

render(html`<${Chat} />`, document.getElementById('chat'));
