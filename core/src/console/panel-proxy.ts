// Plugin panels: a plugin's own pages, served by the plugin host over HTTP on a unix
// socket (`<runDir>/panels/<plugin>.sock`) and mounted here at /plugins/<plugin>/ behind
// the console's session and CSRF checks. The plugin never sees the console's cookie, CSRF
// token or an Authorization header, and cannot set cookies or loosen the console's
// security headers: those are removed from both directions.
import replyFrom from '@fastify/reply-from';
import type { FastifyInstance } from 'fastify';
import { escape } from 'node:querystring';
import type { IncomingHttpHeaders } from 'node:http';

export interface Panel {
  name: string;
  title: string;
  socket: string;
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
    if (!panel) return reply.code(404).send({ code: 'NOT_FOUND', message: `no plugin panel "${request.params.name}"` });
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
      onError: (r) => void r.code(502).send({ code: 'UNAVAILABLE', message: `the ${panel.name} panel is not answering (is the plugin running?)` }),
    });
  });
}
