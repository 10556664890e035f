// `make token` right after `docker compose up -d`: the core may not have made the admin
// token yet (it does on its first start, within seconds). Asked for it, the CLI waits for
// the file, bounded, polling, and only then says there is none.

/** How long `cli.js token` waits for a core that is starting (CARAPACE_TOKEN_WAIT_S overrides). */
export const TOKEN_WAIT_S = 60;

export async function waitForToken(read: () => string | null, timeoutMs: number, pollMs = 500): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const token = read();
    if (token || Date.now() >= deadline) return token;
    await new Promise((r) => setTimeout(r, Math.min(pollMs, Math.max(0, deadline - Date.now()))));
  }
}
