// Talking to the core: JSON over same-origin fetch with the session cookie; every state
// change carries the session's CSRF token. A lost session (the core restarted, the
// session expired) goes to the login page, which brings the person back here.
let csrf = null;

async function csrfToken(fresh = false) {
  if (!csrf || fresh) csrf = (await get('/api/csrf')).token;
  return csrf;
}

/** To the login page, and back to this page after it. */
export function relogin() {
  location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search + location.hash)}`);
  return new Error('your session ended (the core restarted or it expired): log in again');
}

async function request(method, path, body, retried = false) {
  const headers = {};
  if (method !== 'GET') headers['x-csrf-token'] = await csrfToken(retried);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  if (res.status === 401) throw relogin();
  const data = res.status === 204 ? {} : await res.json().catch(() => ({}));
  // A token the core no longer knows (a session saved meanwhile): fetched again once.
  if (res.status === 403 && data.code === 'CSRF_REFUSED' && !retried) return request(method, path, body, true);
  if (!res.ok) throw new Error(data.message || `the core answered ${res.status}`);
  return data;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body ?? {});
export const del = (path) => request('DELETE', path);

/**
 * Follows a server-sent event stream for as long as the page lives: reconnects after any
 * drop (the core or plugin host restarting included) and asks to resume after the last
 * event it had (`since`, also where to start), so that each event is handled once.
 * `onState(connected)` is told only when a drop lasts (a reconnect within `quietMs` shows
 * nothing). Returns a closer.
 */
export function follow(url, onMessage, { onState = () => undefined, since = null, quietMs = 2000 } = {}) {
  let source = null;
  let last = since;
  let closed = false;
  let retry = null;
  let told = null;
  const connected = (up) => {
    clearTimeout(told);
    if (up) onState(true);
    else told = setTimeout(() => onState(false), quietMs);
  };
  const open = () => {
    const sep = url.includes('?') ? '&' : '?';
    source = new EventSource(last ? `${url}${sep}since=${encodeURIComponent(last)}` : url);
    source.onopen = () => connected(true);
    source.onmessage = (m) => {
      if (m.lastEventId) last = m.lastEventId;
      onMessage(JSON.parse(m.data));
    };
    source.onerror = () => {
      connected(false);
      if (source.readyState !== EventSource.CLOSED) return; // the browser retries by itself
      // Refused (401 after a restart, 502 while a plugin is away): find out which, then retry.
      source.close();
      fetch('/api/csrf', { credentials: 'same-origin' }).then((res) => (res.status === 401 ? relogin() : null), () => null);
      retry = setTimeout(() => !closed && open(), 3000);
    };
  };
  open();
  return () => {
    closed = true;
    clearTimeout(retry);
    clearTimeout(told);
    source.close();
  };
}

/** One event stream for the whole page; pages subscribe to what they show. */
const listeners = new Set();
let live = null;
export function onLive(listener) {
  listeners.add(listener);
  live ??= follow('/api/events', (event) => {
    for (const l of listeners) l(event);
  });
  return () => listeners.delete(listener);
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
/** µUSD as dollars: "$1.23", or "$0.0042" under a cent so a small cost does not read as nothing. */
export const dollars = (micros) => (micros > 0 && micros < 10_000 ? `$${(micros / 1e6).toFixed(4)}` : `$${(micros / 1e6).toFixed(2)}`);
export const bytes = (n) => (n < 1024 ? `${n} B` : n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`);
