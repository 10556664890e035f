// The egress service: the appliance's plugin host has no network of its own, and reaches
// the internet only through this process's unix socket, one CONNECT tunnel at a time.
// The plugin host decides which plugin may reach which host (egress-relay.ts) before it
// asks; this service only connects, bounded, and logs each tunnel with the plugin named.
// Only the plugin host can reach the socket (its folder and the socket are the node
// user's, 0700/0600; the plugin host runs as root, its plugins as uids of their own).
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';
import pino from 'pino';
import { CODE_HEADER } from '../src/network/connect-failure.js';
import { splitTarget } from '../src/network/allow-list.js';
import { connectWithin, joinTunnel } from '../src/network/tunnel.js';

export const log = pino({ base: { service: 'egress' } }, pino.destination(2));
const MAX_TUNNELS = 256;
const IDLE_MS = 10 * 60_000;
const CONNECT_TIMEOUT_MS = 15_000;

export function serveEgress(path: string): Promise<ReturnType<typeof createServer>> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  rmSync(path, { force: true });
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.maxConnections = MAX_TUNNELS;
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    const socket = client as Socket;
    socket.on('error', () => undefined);
    const target = splitTarget(req.url ?? '');
    const plugin = String(req.headers['x-carapace-plugin'] ?? '?').slice(0, 64);
    if (!target) return void socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    connectWithin(target.host, Number(target.port), CONNECT_TIMEOUT_MS, (err, upstream) => {
      if (err || !upstream) {
        log.warn({ plugin, target: req.url, err: err?.message }, 'could not connect');
        // The error's code only (ENOTFOUND, ECONNREFUSED): the relay tells the plugin which step failed.
        const code = String((err as NodeJS.ErrnoException | null)?.code ?? '').replace(/[^A-Z0-9_]/g, '').slice(0, 40);
        if (!socket.destroyed) socket.end(`HTTP/1.1 502 Bad Gateway\r\n${code ? `${CODE_HEADER}: ${code}\r\n` : ''}\r\n`);
        return;
      }
      log.info({ plugin, target: req.url }, 'tunnel');
      joinTunnel(socket, upstream, head, { idleMs: IDLE_MS });
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      chmodSync(path, 0o600);
      resolve(server);
    });
  });
}
