// Connection checks: a plugin that talks to a server may export `checkConnections(config,
// context)` from its handler module. The console's Checks page asks for it (through the
// core's admin API and the plugin host); it runs in a process of the plugin's own, with the
// plugin's settings and its way out, and says per server whether it can be reached and
// logged in to, and if not at which step and in the server's own words. It never acts:
// no mail is sent, nothing is written. Here: the shape of an answer and what the bundled
// plugins share to find the step (the name, the connection, TLS) where a failure happened.
import { lookup } from 'node:dns/promises';
import { connect, type Socket } from 'node:net';

/** Where a connection failed: the name, the connection, TLS, the login, or the first listing after it. */
export type ConnectionStep = 'dns' | 'connect' | 'tls' | 'login' | 'listing';
export const CONNECTION_STEPS: readonly ConnectionStep[] = ['dns', 'connect', 'tls', 'login', 'listing'];

export interface ConnectionCheckResult {
  /** What was checked, e.g. "IMAP imap.example.com:993". */
  name: string;
  ok: boolean;
  /** The step that failed, or the last one that passed when `ok`. */
  step: ConnectionStep;
  /** What passed, or why not: the server's own words where it gave any (no secret in them). */
  message: string;
}

export interface ConnectionCheckContext {
  /** Aborted when the check's time is up (the core waits 15 s at most): close what is open. */
  signal: AbortSignal;
  /** The plugin's way out (as CoreServices.egressProxy); fetch() goes there already. */
  egressProxy?: string;
}

/** The handler module's optional `checkConnections` export. */
export type CheckConnections = (config: Record<string, unknown>, context: ConnectionCheckContext) => Promise<ConnectionCheckResult[]>;

export type Reach = { ok: true } | { ok: false; step: 'dns' | 'connect'; message: string };

const REACH_TIMEOUT_MS = 10_000;

/** Each configured secret (a password) as [REDACTED]: a server may repeat what it was sent. */
export function scrubSecrets(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) if (secret && secret.length >= 4) out = out.split(secret).join('[REDACTED]');
  return out;
}

/** An error in words for a person: its message (first line), its code when that adds something. */
export function errorWords(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  const message = String(e?.message ?? err).split('\n', 1)[0].trim();
  const code = typeof e?.code === 'string' ? e.code : '';
  return code && !message.includes(code) ? `${message} (${code})` : message;
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_(VERIFY|GET)_|ETLS$|EPROTO$|HOSTNAME_MISMATCH$)/;

/** Did TLS fail (the handshake, the certificate, a server that speaks no TLS on that port)? */
export function isTlsFailure(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown; message?: unknown } | null, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && TLS_CODES.test(e.code)) return true;
    if (typeof e.message === 'string' && /SSL routines|wrong version number|packet length too long|unknown protocol|certificate|self[- ]signed|handshake failure|alert (handshake|protocol)|Client network socket disconnected before secure TLS connection/i.test(e.message)) return true;
  }
  return false;
}

/** A TLS failure in words: OpenSSL's reason ("wrong version number") rather than its whole error string. */
export function tlsWords(err: unknown): string {
  const words = errorWords(err);
  const reason = /SSL routines:[^:]*:([^:]+):/.exec(words)?.[1];
  const code = (err as { code?: unknown } | null)?.code;
  return reason ? `${reason}${typeof code === 'string' ? ` (${code})` : ''}` : words;
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'ENODATA']);

/**
 * Can `host:port` be reached at all: its name resolved and a TCP connection opened (then
 * closed)? Through the plugin's relay when it has one (the relay resolves and connects,
 * and says which of the two failed); directly otherwise.
 */
export async function reach(host: string, port: number, context: Pick<ConnectionCheckContext, 'signal' | 'egressProxy'>): Promise<Reach> {
  const target = `${host}:${port}`;
  if (context.egressProxy) return reachThrough(context.egressProxy, target, context.signal);
  try {
    await lookup(host);
  } catch (err) {
    return { ok: false, step: 'dns', message: `the name ${host} does not resolve: ${errorWords(err)}` };
  }
  return new Promise<Reach>((resolve) => {
    const socket = connect({ host, port, timeout: REACH_TIMEOUT_MS });
    const done = (result: Reach): void => {
      socket.destroy();
      context.signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const onAbort = (): void => done({ ok: false, step: 'connect', message: `no connection to ${target} in time` });
    context.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => done({ ok: true }));
    socket.once('timeout', () => done({ ok: false, step: 'connect', message: `no answer from ${target} within ${REACH_TIMEOUT_MS / 1000} s` }));
    socket.once('error', (err) => done({ ok: false, step: DNS_CODES.has(String((err as NodeJS.ErrnoException).code)) ? 'dns' : 'connect', message: `could not connect to ${target}: ${errorWords(err)}` }));
  });
}

/** A CONNECT through the relay, read by hand: its status, the step it names (x-carapace-step) and its words. */
function reachThrough(proxy: string, target: string, signal: AbortSignal): Promise<Reach> {
  const url = new URL(proxy);
  const auth = Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64');
  return new Promise<Reach>((resolve) => {
    let socket: Socket | null = null;
    let answer = '';
    const timer = setTimeout(() => done({ ok: false, step: 'connect', message: `no connection to ${target} within ${REACH_TIMEOUT_MS / 1000} s` }), REACH_TIMEOUT_MS);
    const onAbort = (): void => done({ ok: false, step: 'connect', message: `no connection to ${target} in time` });
    function done(result: Reach): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      socket?.destroy();
      socket = null;
      resolve(result);
    }
    signal.addEventListener('abort', onAbort, { once: true });
    const s = connect({ host: url.hostname, port: Number(url.port) });
    socket = s;
    s.once('connect', () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`));
    s.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
      if (answer.length > 4096) answer = answer.slice(0, 4096);
      const head = answer.indexOf('\r\n\r\n');
      if (head < 0) return;
      const status = /^HTTP\/\d\.\d (\d{3})/.exec(answer)?.[1];
      if (status === '200') return done({ ok: true });
      // A refusal ends with the connection: its body is the relay's words.
      if (!s.readableEnded && answer.length < 4096) return;
      finishRefusal();
    });
    const finishRefusal = (): void => {
      const head = answer.indexOf('\r\n\r\n');
      const headers = head < 0 ? answer : answer.slice(0, head);
      const body = head < 0 ? '' : answer.slice(head + 4).trim();
      const status = /^HTTP\/\d\.\d (\d{3}[^\r\n]*)/.exec(headers)?.[1] ?? 'no answer';
      const step = /^x-carapace-step:\s*dns\s*$/im.test(headers) ? 'dns' : 'connect';
      done({ ok: false, step, message: body ? body.split('\n', 1)[0].slice(0, 500) : `the plugin's network relay answered ${status}` });
    };
    s.once('end', () => (socket ? finishRefusal() : undefined));
    s.once('error', (err) => done({ ok: false, step: 'connect', message: `the plugin's network relay could not be reached: ${errorWords(err)}` }));
  });
}
