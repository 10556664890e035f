// Plugin panels: a plugin's own pages, served by the plugin host over HTTP on a unix
// socket (`<runDir>/panels/<plugin>.sock`) and mounted here at /plugins/<plugin>/ behind
// the console's session and CSRF checks. The plugin never sees the console's cookie, CSRF
// token or an Authorization header, and cannot set cookies or loosen the console's
// security headers: those are removed from both directions.
import replyFrom from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { escape } from 'node:querystring';
import type { IncomingHttpHeaders } from 'node:http';

export interface Panel {
  name: string;
  title: string;
  socket: string;
  /** Why the panel cannot serve now (its plugin is starting, restarting, failed); null or absent: it can. */
  down?: string | null;
}

const DROPPED_REQUEST_HEADERS = ['cookie', 'authorization', 'x-csrf-token', 'csrf-token', 'xsrf-token', 'x-xsrf-token'];
const DROPPED_RESPONSE_HEADERS = ['set-cookie', 'content-security-policy', 'content-security-policy-report-only', 'x-frame-options', 'access-control-allow-origin', 'access-control-allow-credentials', 'strict-transport-security'];

/** A state change made through a panel (method, path with query, the panel's status), for the audit log. */
export type PanelChange = (plugin: string, method: string, path: string, status: number) => void;

export async function registerPanelProxy(app: FastifyInstance, panels: () => Panel[], changed: PanelChange): Promise<void> {
  // Node's http client: undici cannot reach a unix socket through reply-from.
  await app.register(replyFrom, { http: {} });
  // Whatever a person changes through a plugin's page is on the audit trail, whatever the plugin logs.
  app.addHook('onResponse', async (request, reply) => {
    const name = (request.params as { name?: string } | undefined)?.name;
    if (name && request.method !== 'GET' && request.method !== 'HEAD' && request.url.startsWith('/plugins/')) {
      changed(name, request.method, request.url.slice(`/plugins/${name}`.length), reply.statusCode);
    }
  });
  app.get<{ Params: { name: string } }>('/plugins/:name', (request, reply) => reply.redirect(`/plugins/${encodeURIComponent(request.params.name)}/`, 308));
  app.all<{ Params: { name: string; '*': string } }>('/plugins/:name/*', (request, reply) => {
    const panel = panels().find((p) => p.name === request.params.name);
    if (!panel) return notServed(request, reply, 404, { code: 'NOT_FOUND', message: `no plugin panel "${request.params.name}"` });
    if (panel.down) return notServed(request, reply, 503, { code: 'UNAVAILABLE', message: `the ${panel.title} page is not available: ${panel.down}` });
    const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
    const path = `/${request.params['*']}${query}`;
    return reply.from(`unix+http://${escape(panel.socket)}${path}`, {
      rewriteRequestHeaders: (_req, headers: IncomingHttpHeaders) => {
        const out: IncomingHttpHeaders = { ...headers, 'x-carapace-console': '1' };
        for (const name of DROPPED_REQUEST_HEADERS) delete out[name];
        return out;
      },
      rewriteHeaders: (headers) => {
        const out = { ...headers };
        for (const name of DROPPED_RESPONSE_HEADERS) delete out[name];
        return out;
      },
      onError: () => void notServed(request, reply, 502, { code: 'UNAVAILABLE', message: `the ${panel.title} page is not answering (is the plugin running?)` }),
    });
  });
}

/**
 * A panel that cannot answer. A person's browser gets a page that says why and tries
 * again by itself (after a core restart the plugins report back within seconds: the
 * page they were on must come back, not stay a JSON error); a script gets the error.
 */
function notServed(request: FastifyRequest, reply: FastifyReply, status: number, error: { code: string; message: string }): FastifyReply {
  const retry = status === 404 ? null : 2;
  if (retry) reply.header('retry-after', String(retry));
  const wantsPage = request.method === 'GET' && (request.headers.accept ?? '').includes('text/html');
  if (!wantsPage) return reply.code(status).send({ ...error, retriable: retry !== null });
  const refresh = retry ? `<meta http-equiv="refresh" content="${retry}">` : '';
  const then = retry ? 'This page tries again by itself.' : '';
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(`<!doctype html><html lang="en"><head><meta charset="utf-8">${refresh}<title>Carapace</title><link rel="stylesheet" href="/public/style.css"></head>` +
      `<body><main class="page"><p><a href="/">← Console</a></p><p id="unavailable" role="status">${escapeHtml(error.message)}. ${then}</p></main></body></html>`);
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
