// The email plugin's connection check (the console's Checks page): IMAP (connect, TLS as
// configured, login, the folder list with INBOX, logout) and SMTP (connect, EHLO, STARTTLS
// or TLS as configured, AUTH with the configured login, QUIT: no mail is sent), each saying
// the step that failed and the server's own words, with the passwords scrubbed out.
import { ImapFlow } from 'imapflow';
import nodemailer from 'nodemailer';
import { errorWords, isTlsFailure, reach, scrubSecrets, tlsWords, type ConnectionCheckContext, type ConnectionCheckResult, type ConnectionStep } from '#sdk';
import { parseSettings, type Server } from './settings.js';

const TIMEOUTS = { connectionTimeout: 8000, greetingTimeout: 6000, socketTimeout: 10_000 };

type Result = ConnectionCheckResult;

/** The server's own words, where the library kept them (imapflow's `response`, nodemailer's `response`), else the error's. */
function serverWords(err: unknown): string {
  const e = err as { response?: unknown; responseText?: unknown; serverResponseCode?: unknown } | null;
  const code = typeof e?.serverResponseCode === 'string' ? `[${e.serverResponseCode}] ` : '';
  for (const text of [e?.responseText, e?.response]) if (typeof text === 'string' && text.trim() !== '') return `${text.includes(code.trim()) ? '' : code}${text.trim()}`;
  return errorWords(err);
}

export async function checkConnections(config: Record<string, unknown>, context: ConnectionCheckContext): Promise<Result[]> {
  const settings = parseSettings(config);
  const secrets = [settings.imap.password, settings.smtp.password];
  const results = await Promise.all([checkImap(settings.imap, context), checkSmtp(settings.smtp, context)]);
  return results.map((r) => ({ ...r, message: scrubSecrets(r.message, secrets) }));
}

async function checkImap(server: Server, context: ConnectionCheckContext): Promise<Result> {
  const name = `IMAP ${server.host}:${server.port}${server.secure ? ' (TLS)' : ''}`;
  const fail = (step: ConnectionStep, message: string): Result => ({ name, ok: false, step, message });
  const reached = await reach(server.host, server.port, context);
  if (!reached.ok) return fail(reached.step, reached.message);
  const client = new ImapFlow({
    host: server.host,
    port: server.port,
    secure: server.secure,
    auth: { user: server.user, pass: server.password },
    logger: false,
    ...(context.egressProxy ? { proxy: context.egressProxy } : {}),
    ...TIMEOUTS,
  });
  client.on('error', () => undefined); // each step's rejection says it
  const onAbort = (): void => client.close();
  context.signal.addEventListener('abort', onAbort, { once: true });
  try {
    try {
      // Greeting, TLS (from the start, or STARTTLS when offered), then LOGIN.
      await client.connect();
    } catch (err) {
      if ((err as { authenticationFailed?: boolean }).authenticationFailed) return fail('login', `the server refused the login of ${server.user}: ${serverWords(err)}`);
      if (isTlsFailure(err)) return fail('tls', `TLS with the server failed: ${tlsWords(err)}${server.secure ? ' (is the port one that speaks TLS from the start? 993 does; 143 does not: set "secure": false there)' : ''}`);
      return fail('connect', `the server did not take the connection: ${serverWords(err)}`);
    }
    try {
      const folders = await client.list();
      if (!folders.some((f) => f.path.toUpperCase() === 'INBOX')) return fail('listing', `logged in as ${server.user}, but the server lists no INBOX (${folders.length} folders)`);
      return { name, ok: true, step: 'listing', message: `logged in as ${server.user}; the server lists INBOX and ${folders.length - 1} other folder${folders.length === 2 ? '' : 's'}` };
    } catch (err) {
      return fail('listing', `logged in as ${server.user}, but listing the folders failed: ${serverWords(err)}`);
    }
  } finally {
    context.signal.removeEventListener('abort', onAbort);
    if (client.usable) await client.logout().catch(() => client.close());
    else client.close();
  }
}

async function checkSmtp(server: Server, context: ConnectionCheckContext): Promise<Result> {
  const name = `SMTP ${server.host}:${server.port}${server.secure ? ' (TLS)' : ''}`;
  const fail = (step: ConnectionStep, message: string): Result => ({ name, ok: false, step, message });
  const reached = await reach(server.host, server.port, context);
  if (!reached.ok) return fail(reached.step, reached.message);
  const transport = nodemailer.createTransport({
    host: server.host,
    port: server.port,
    secure: server.secure,
    auth: { user: server.user, pass: server.password },
    ...(context.egressProxy ? { proxy: context.egressProxy } : {}),
    ...TIMEOUTS,
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const onAbort = (): void => transport.close();
  context.signal.addEventListener('abort', onAbort, { once: true });
  try {
    // Connect, EHLO, STARTTLS (when offered) or TLS, AUTH, QUIT: nothing is sent.
    await transport.verify();
    return { name, ok: true, step: 'login', message: `the server greeted and took the login of ${server.user} (no mail was sent)` };
  } catch (err) {
    const e = err as { code?: string; command?: string };
    if (e.code === 'EAUTH') return fail('login', `the server refused the login of ${server.user}: ${serverWords(err)}`);
    if (e.code === 'EDNS') return fail('dns', `the name ${server.host} does not resolve: ${errorWords(err)}`);
    if (e.code === 'ETLS' || isTlsFailure(err)) return fail('tls', `TLS with the server failed: ${tlsWords(err)}${server.secure ? ' (is the port one that speaks TLS from the start? 465 does; 587 does not: set "secure": false there)' : ''}`);
    return fail('connect', `the server did not take the connection: ${serverWords(err)}`);
  } finally {
    context.signal.removeEventListener('abort', onAbort);
    transport.close();
  }
}
