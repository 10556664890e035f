// Plugin panels: a plugin whose manifest declares `panel` and whose handler has
// servePanel() gets an HTTP server on `<runDir>/panels/<plugin>.sock` (folder 0700,
// socket 0600). Only the core's console connects: it checks the session and CSRF token
// first and mounts the panel at /plugins/<plugin>/. Agents have no path to this folder.
// The plugin's process serves it on a socket in its own data folder; the plugin host
// passes each request on (`relayTo`), so the core never reaches a plugin's files.
import { chmodSync, chownSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import pino, { type Logger } from 'pino';
import { SOCKETS } from '../src/plugins/host-protocol.js';
import { PluginIds } from './isolation.js';

const log = pino({ base: { service: 'plugin-host' } });
/** Concurrent connections per panel: the console's proxy keeps a few; more is a flood. */
const MAX_CONNECTIONS = 64;

export function panelSocket(runDir: string, plugin: string): string {
  return join(runDir, SOCKETS.panels, `${plugin}.sock`);
}

/** Serves `handle` on the unix socket `path` (its folder made 0700 if missing, the socket 0600). */
export async function servePanel(path: string, plugin: string, handle: (req: IncomingMessage, res: ServerResponse) => unknown): Promise<Server> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  chmodSync(dirname(path), 0o700);
  rmSync(path, { force: true }); // a socket left by a host that was killed
  const server = createServer((req, res) => {
    // A panel that throws (or rejects) answers 500; it never takes the host down.
    const fail = (err: unknown): void => {
      log.error({ plugin, err: String((err as Error)?.message ?? err) }, 'panel request failed');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'INTERNAL_ERROR', message: 'the plugin panel failed' }));
    };
    try {
      Promise.resolve(handle(req, res)).catch(fail);
    } catch (err) {
      fail(err);
    }
  });
  server.maxConnections = MAX_CONNECTIONS;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  chmodSync(path, 0o600);
  return server;
}

/** A handler that passes each request on to the HTTP server on `socketPath`, streaming both ways. */
export function relayTo(socketPath: string): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return (req, res) =>
    new Promise((resolve, reject) => {
      const upstream = request({ socketPath, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('end', () => resolve());
        answer.on('error', reject);
      });
      upstream.on('error', reject);
      req.pipe(upstream);
    });
}

/** The console's socket for each plugin's panel, relaying to the plugin's own: made once, kept across the plugin's restarts. */
export class PublicPanels {
  private readonly servers = new Map<string, Server>();
  private closed = false;

  constructor(
    private readonly runDir: string,
    private readonly logger: Logger,
  ) {}

  async open(name: string, privateSocket: string): Promise<void> {
    if (this.servers.has(name) || this.closed) return;
    try {
      const socket = panelSocket(this.runDir, name);
      this.servers.set(name, await servePanel(socket, name, relayTo(privateSocket)));
      // The console connects as the core's user, who owns the run folder; a root host hands it over.
      if (PluginIds.isolating()) {
        const { uid, gid } = statSync(this.runDir);
        for (const path of [dirname(socket), socket]) chownSync(path, uid, gid);
      }
    } catch (err) {
      this.logger.error({ plugin: name, err }, 'panel socket could not be made');
    }
  }

  close(): void {
    this.closed = true;
    for (const server of this.servers.values()) server.close();
  }
}
