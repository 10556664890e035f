// Talking to the core: JSON over same-origin fetch with the session cookie; every state
// change carries the session's CSRF token. A lost session goes back to the login page.
let csrf = null;

async function csrfToken() {
  if (!csrf) csrf = (await get('/api/csrf')).token;
  return csrf;
}

async function request(method, path, body) {
  const headers = {};
  if (method !== 'GET') headers['x-csrf-token'] = await csrfToken();
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  if (res.status === 401) {
    location.assign('/login');
    throw new Error('log in again');
  }
  const data = res.status === 204 ? {} : await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.message || `the core answered ${res.status}`);
  return data;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body ?? {});
export const del = (path) => request('DELETE', path);

/** One event stream for the whole page; pages subscribe to what they show. */
const listeners = new Set();
let source = null;
export function onLive(listener) {
  listeners.add(listener);
  if (!source) {
    source = new EventSource('/api/events');
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      for (const l of listeners) l(event);
    };
  }
  return () => listeners.delete(listener);
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
export const bytes = (n) => (n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`);
