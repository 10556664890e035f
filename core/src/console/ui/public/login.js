// Posts the admin token as JSON (never in a URL); the core answers with a session cookie.
// Then back to the page that sent the person here (`next`), if it is one of the console's.
function next() {
  const target = new URL(new URLSearchParams(location.search).get('next') || '/', location.origin);
  return target.origin === location.origin && target.pathname !== '/login' ? target.pathname + target.search + target.hash : '/';
}
const form = document.getElementById('login');
const error = document.getElementById('error');
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  error.textContent = '';
  const token = document.getElementById('token').value;
  try {
    const res = await fetch('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    if (res.ok) {
      location.assign(next());
      return;
    }
    const body = await res.json().catch(() => ({}));
    error.textContent = body.message || `refused (${res.status})`;
  } catch {
    error.textContent = 'the core is not answering: is the appliance running? (docker compose ps)';
  }
});
