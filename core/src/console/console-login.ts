// What every console page stands on, in normal operation and in safe mode alike: the
// security headers (strict CSP), login with the admin token, server-side sessions (an
// HttpOnly, SameSite=Strict cookie), and a CSRF token on every state change.
//
// A session's CSRF secret is made once, at login: @fastify/session saves the whole session
// after each response, and a long request (an event stream) that loaded it before a
// secret existed would otherwise save it back without one, refusing every later change.
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import helmet from '@fastify/helmet';
import rateLimit from '@fastify/rate-limit';
import session from '@fastify/session';
import fastifyStatic from '@fastify/static';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AuditLog } from '../audit/audit-log.js';

declare module 'fastify' {
  interface Session {
    user?: 'admin';
  }
}

/** The sessions and the key their cookies are signed with: one per process, so that they outlive a safe mode. */
export interface ConsoleSessions {
  secret: string;
  store: InstanceType<typeof session.MemoryStore>;
}

export function consoleSessions(): ConsoleSessions {
  return { secret: randomBytes(32).toString('base64url'), store: new session.MemoryStore(new BoundedMap()) };
}

export interface LoginOptions {
  token: string;
  sessions?: ConsoleSessions;
  /** Set the cookie's Secure flag (behind an https proxy). */
  secureCookie?: boolean;
  /** Login attempts per client per minute (default 10). */
  loginPerMinute?: number;
  /** Where logins, accepted or refused, are audited. */
  audit: Pick<AuditLog, 'record'>;
}

const SESSION_HOURS = 12;
const MAX_SESSIONS = 100;
const LOGIN_PER_MINUTE = 10;
export const UI_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../../core/src/console/ui');
const VENDOR_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../../node_modules/htm/preact');

/** The session store: a Map that forgets its oldest entry past MAX_SESSIONS (each login makes one). */
class BoundedMap<K, V> extends Map<K, V> {
  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= MAX_SESSIONS) this.delete(this.keys().next().value as K);
    return super.set(key, value);
  }
}

function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** fastify's and its plugins' errors as the console's `{code, message}`. */
function errorBody(err: FastifyError): { status: number; body: { code: string; message: string } } {
  const status = err.statusCode ?? 500;
  if (err.code?.startsWith('FST_CSRF')) return { status: 403, body: { code: 'CSRF_REFUSED', message: 'missing or wrong CSRF token: reload the page' } };
  if (status === 429) return { status, body: { code: 'RATE_LIMITED', message: 'too many attempts: wait a minute' } };
  if (status < 500) return { status, body: { code: 'INVALID_INPUT', message: err.message } };
  return { status, body: { code: 'INTERNAL_ERROR', message: 'the console failed to answer; see the core log' } };
}

/** Headers, sessions, CSRF, the public login page and POST /login on `app`. */
export async function registerLogin(app: FastifyInstance, options: LoginOptions): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    // Plain http on loopback: HSTS would pin a name to https that nothing serves.
    strictTransportSecurity: options.secureCookie ? undefined : false,
  });
  await app.register(cookie);
  const { secret, store } = options.sessions ?? consoleSessions();
  await app.register(session, {
    secret,
    cookieName: 'carapace_session',
    saveUninitialized: false,
    store,
    cookie: { httpOnly: true, sameSite: 'strict', secure: options.secureCookie ?? false, path: '/', maxAge: SESSION_HOURS * 3_600_000 },
  });
  await app.register(csrf, { sessionPlugin: '@fastify/session' });
  await app.register(rateLimit, { global: false });
  app.setErrorHandler((err: FastifyError, _request, reply) => {
    const { status, body } = errorBody(err);
    void reply.code(status).send(body);
  });

  await app.register(fastifyStatic, { root: join(UI_DIR, 'public'), prefix: '/public/', index: false });
  app.get('/login', (_request, reply) => reply.sendFile('login.html', join(UI_DIR, 'public')));
  app.post('/login', { config: { rateLimit: { max: options.loginPerMinute ?? LOGIN_PER_MINUTE, timeWindow: 60_000 } } }, async (request, reply) => {
    // JSON only: a cross-site form cannot send it without a CORS preflight, which fails here.
    if (!request.headers['content-type']?.startsWith('application/json')) {
      return reply.code(415).send({ code: 'INVALID_INPUT', message: 'send {"token": "..."} as application/json' });
    }
    const given = (request.body as { token?: unknown } | null)?.token;
    const audit = (outcome: 'ok' | 'rejected', reason: string) =>
      options.audit.record({ group: null, session: null, source: 'console', topic: null, correlation: null, stage: 'core', outcome, reason });
    if (!sameToken(given, options.token)) {
      audit('rejected', `console login refused from ${request.ip}`);
      return reply.code(401).send({ code: 'UNAUTHORIZED', message: 'wrong admin token' });
    }
    await request.session.regenerate();
    request.session.set('user', 'admin');
    reply.generateCsrf(); // the session's one CSRF secret (see the top of this file)
    audit('ok', `console login from ${request.ip}`);
    return reply.code(204).send();
  });
}

/**
 * The logged-in part, registered inside `authed` (an encapsulated context): the session
 * check, CSRF on every state change, the console's pages and assets, /api/csrf, /logout.
 */
export async function registerShell(authed: FastifyInstance): Promise<void> {
  authed.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.session.get('user') === 'admin') return;
    const wantsPage = request.method === 'GET' && !request.url.startsWith('/api/') && (request.headers.accept ?? '').includes('text/html');
    if (wantsPage) return reply.redirect(request.url === '/' ? '/login' : `/login?next=${encodeURIComponent(request.url)}`, 303);
    return reply.code(401).send({ code: 'UNAUTHORIZED', message: 'log in first' });
  });
  authed.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'GET' || request.method === 'HEAD') return done();
    authed.csrfProtection(request, reply, done);
  });
  await authed.register(fastifyStatic, { root: join(UI_DIR, 'app'), prefix: '/assets/', index: false, decorateReply: false });
  authed.get('/assets/vendor/preact-htm.js', (_request, reply) => reply.sendFile('standalone.module.js', VENDOR_DIR));
  authed.get('/', (_request, reply) => reply.header('cache-control', 'no-store').sendFile('index.html', join(UI_DIR, 'app')));
  authed.get('/api/csrf', async (_request, reply) => ({ token: reply.generateCsrf() }));
  authed.post('/logout', async (request, reply) => {
    await request.session.destroy();
    return reply.code(204).send();
  });
}
