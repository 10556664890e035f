// IMAP connections (imapflow). The watcher keeps one open; each tool call opens its own,
// closed when the call's signal aborts, so a deadline never leaves a command hanging.
import { ImapFlow } from 'imapflow';
import { AbortedBeforeActing } from '#sdk';
import type { Server } from './settings.js';

export function imapClient(server: Server, proxy: string | undefined): ImapFlow {
  return new ImapFlow({
    host: server.host,
    port: server.port,
    secure: server.secure,
    auth: { user: server.user, pass: server.password },
    logger: false,
    ...(proxy ? { proxy } : {}),
    connectionTimeout: 30_000,
    greetingTimeout: 15_000,
    socketTimeout: 5 * 60_000,
  });
}

/** Runs `work` on a fresh connection; an abort closes it (the command in flight fails). */
export async function withImap<T>(server: Server, proxy: string | undefined, signal: AbortSignal | undefined, work: (client: ImapFlow) => Promise<T>): Promise<T> {
  if (signal?.aborted) throw new AbortedBeforeActing();
  const client = imapClient(server, proxy);
  client.on('error', () => undefined); // surfaced as the failing command's rejection
  const onAbort = (): void => client.close();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await client.connect();
    return await work(client);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (client.usable) await client.logout().catch(() => client.close());
    else client.close();
  }
}
