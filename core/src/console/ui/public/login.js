// Posts the admin token as JSON (never in a URL); the core answers with a session cookie.
const form = document.getElementById('login');
const error = document.getElementById('error');
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  error.textContent = '';
  const token = document.getElementById('token').value;
  try {
    const res = await fetch('/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    if (res.ok) {
      location.assign('/');
      return;
    }
    const body = await res.json().catch(() => ({}));
    error.textContent = body.message || `refused (${res.status})`;
  } catch {
    error.textContent = 'the core is not answering: is the appliance running? (docker compose ps)';
  }
});
