// Each plugin's way out: an HTTP CONNECT proxy on the host's loopback that opens only with
// the plugin's own token (handed to its process, which runs as its own uid: another
// plugin cannot read it) and reaches only the plugin's allow-list. Where the appliance
// runs the plugin host without a network, it connects on through the egress service's
// unix socket (core/egress/); elsewhere it connects itself. The check is made here, in
// the host, outside the plugin's process.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { CODE_HEADER, connectFailure, refusalText } from '../src/network/connect-failure.js';
import { splitTarget, type AllowList } from '../src/network/allow-list.js';
import { connectWithin, joinTunnel } from '../src/network/tunnel.js';

/** Tunnels open at once per plugin; more is a flood. */
const MAX_TUNNELS = 64;
/** A tunnel with no traffic for this long is closed. */
const IDLE_MS = 10 * 60_000;
const CONNECT_TIMEOUT_MS = 15_000;

export interface RelayOptions {
  plugin: string;
  allow: AllowList;
  /** The egress service's socket, or null: connect from here. */
  via: string | null;
  log: Logger;
  /** Each refusal, for the audit log. */
  refused: (target: string, reason: string) => void;
}

export class EgressRelay {
  private readonly token = randomBytes(24).toString('hex');
  private readonly server: Server;
  private port = 0;

  private constructor(private readonly options: RelayOptions) {
    this.server = createServer((_req, res) => {
      res.writeHead(405, { 'content-type': 'text/plain' }).end('CONNECT only\n');
    });
    this.server.maxConnections = MAX_TUNNELS;
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.tunnel(req, socket as Socket, head));
  }

  static async open(options: RelayOptions): Promise<EgressRelay> {
    const relay = new EgressRelay(options);
    await new Promise<void>((resolve, reject) => {
      relay.server.once('error', reject);
      relay.server.listen(0, '127.0.0.1', () => resolve());
    });
    relay.port = (relay.server.address() as { port: number }).port;
    return relay;
  }

  /** The proxy URL for the plugin's process, credentials included. */
  get url(): string {
    return `http://${encodeURIComponent(this.options.plugin)}:${this.token}@127.0.0.1:${this.port}`;
  }

  close(): void {
    this.server.close();
    this.server.closeAllConnections();
  }

  private authorized(req: IncomingMessage): boolean {
    const header = req.headers['proxy-authorization'] ?? '';
    const expected = Buffer.from(`Basic ${Buffer.from(`${this.options.plugin}:${this.token}`).toString('base64')}`);
    const given = Buffer.from(header);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private tunnel(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const target = req.url ?? '';
    const refuse = (status: string, reason: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${reason}\n`);
    };
    socket.on('error', () => undefined);
    if (!this.authorized(req)) return refuse('407 Proxy Authentication Required', 'not this plugin\'s token');
    if (!splitTarget(target) || !this.options.allow.allows(target)) {
      this.options.refused(target.slice(0, 300), 'not in its manifest\'s network');
      return refuse('403 Forbidden', `${target.slice(0, 300)} is not among the hosts plugin "${this.options.plugin}" declares`);
    }
    this.open(target, (err, upstream) => {
      if (err || !upstream) {
        this.options.log.warn({ plugin: this.options.plugin, target, err: err?.message }, 'egress: could not connect');
        // Which step failed (the name, the connection), for the plugin's connection check.
        return void socket.end(refusalText('502 Bad Gateway', connectFailure(target, (err as NodeJS.ErrnoException | null)?.code, err?.message)));
      }
      joinTunnel(socket, upstream, head, { idleMs: IDLE_MS });
    });
  }

  private open(target: string, then: (err: Error | null, upstream?: Socket) => void): void {
    const { via } = this.options;
    let called = false;
    const done = (err: Error | null, upstream?: Socket): void => {
      if (called) return;
      called = true;
      then(err, upstream);
    };
    if (via === null) {
      const { host, port } = splitTarget(target)!;
      connectWithin(host, Number(port), CONNECT_TIMEOUT_MS, done);
      return;
    }
    // Through the egress service, which connects from a network this process has none of.
    const ask = request({ socketPath: via, method: 'CONNECT', path: target, headers: { host: target, 'x-carapace-plugin': this.options.plugin }, timeout: CONNECT_TIMEOUT_MS });
    ask.once('connect', (res, upstream) => {
      if (res.statusCode === 200) done(null, upstream);
      else {
        upstream.destroy();
        const code = res.headers[CODE_HEADER];
        done(Object.assign(new Error(`egress answered ${res.statusCode}`), typeof code === 'string' ? { code: code.slice(0, 40) } : {}));
      }
    });
    ask.once('timeout', () => ask.destroy(new Error('egress did not answer')));
    ask.once('error', (err) => done(err));
    ask.end();
  }
}
