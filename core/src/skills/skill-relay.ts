// A skill sandbox's one way out: a CONNECT relay on a unix socket that only that sandbox
// has (mounted into it; a forwarder inside gives its runs a proxy on 127.0.0.1:3128). It
// allows the skill's hosts (skill.json network.hosts, and those its settings name), and,
// for a skill that declares the public internet, any host whose every address is public
// unicast, resolved here once and connected to by that address (network/public-address.ts).
// Bounded: tunnels at once, the size of a CONNECT, the time to send it, idle time and bytes
// per tunnel. Each refusal says its code to the run (x-carapace-refused) and is audited.
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { AllowList } from '../network/allow-list.js';
import { splitTarget } from '../network/allow-list.js';
import { connectFailure } from '../network/connect-failure.js';
import { publicAddress, resolveHost, type Resolver } from '../network/public-address.js';
import { connectWithin, joinTunnel } from '../network/tunnel.js';

export const RELAY_LIMITS = {
  /** Tunnels (and connections waiting to become one) at once; more are closed unanswered. */
  tunnels: 16,
  /** The CONNECT request with its headers. */
  headerBytes: 8 * 1024,
  /** To send the whole CONNECT request. */
  headersMs: 10_000,
  idleMs: 60_000,
  tunnelBytes: 64 * 1024 * 1024,
  connectMs: 15_000,
  /** Refusals audited one by one; the rest are counted in one entry when the relay closes. */
  refusalsAudited: 20,
};

export const REFUSED_HEADER = 'x-carapace-refused';
export type RefusalCode = 'BAD_TARGET' | 'HOST_NOT_ALLOWED' | 'ADDRESS_NOT_PUBLIC' | 'DNS_FAILED' | 'CONNECT_FAILED';

export interface SkillRelayOptions {
  skill: string;
  socketPath: string;
  allow: AllowList;
  /** skill.json network.public. */
  public: boolean;
  resolve: Resolver;
  log: Logger;
  /** A refusal (the first RELAY_LIMITS.refusalsAudited; then `more` counts the rest once, at close). */
  refused(target: string, code: RefusalCode, words: string): void;
  more(count: number): void;
}

export class SkillRelay {
  private readonly server: Server;
  private refusals = 0;
  /** Tunnels made; bytes carried by those that closed. */
  tunnels = 0;
  bytes = 0;

  private constructor(private readonly options: SkillRelayOptions) {
    this.server = createServer({ maxHeaderSize: RELAY_LIMITS.headerBytes, headersTimeout: RELAY_LIMITS.headersMs, requestTimeout: RELAY_LIMITS.headersMs, connectionsCheckingInterval: 1000 }, (_req, res) => {
      res.writeHead(405, { 'content-type': 'text/plain', connection: 'close' }).end('CONNECT only\n');
    });
    this.server.maxConnections = RELAY_LIMITS.tunnels;
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket as Socket, head));
    this.server.on('clientError', (_err, socket) => socket.destroy());
  }

  /** A relay listening on `socketPath` (its folder made 0755, the socket 0666: only the sandbox it is mounted into reaches it). */
  static async open(options: SkillRelayOptions): Promise<SkillRelay> {
    const relay = new SkillRelay(options);
    mkdirSync(dirname(options.socketPath), { recursive: true, mode: 0o755 });
    rmSync(options.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      relay.server.once('error', reject);
      relay.server.listen(options.socketPath, () => resolve());
    });
    // The sandbox's forwarder runs as nobody: it must be able to connect.
    chmodSync(options.socketPath, 0o666);
    return relay;
  }

  close(): void {
    this.server.close();
    this.server.closeAllConnections();
    rmSync(dirname(this.options.socketPath), { recursive: true, force: true });
    if (this.refusals > RELAY_LIMITS.refusalsAudited) this.options.more(this.refusals - RELAY_LIMITS.refusalsAudited);
  }

  private refuse(socket: Socket, target: string, status: string, code: RefusalCode, words: string): void {
    if (++this.refusals <= RELAY_LIMITS.refusalsAudited) this.options.refused(target, code, words);
    if (!socket.destroyed) socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\n${REFUSED_HEADER}: ${code}\r\nconnection: close\r\n\r\n${code}: ${words}\n`);
  }

  private async tunnel(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => undefined);
    const target = (req.url ?? '').slice(0, 300);
    const split = splitTarget(target);
    const { skill, allow } = this.options;
    if (!split || Number(split.port) < 1 || Number(split.port) > 65535) return this.refuse(socket, target, '400 Bad Request', 'BAD_TARGET', `"${target}" is not host:port`);
    // A declared host is reached whatever its addresses (the person named it: a SearXNG on the
    // LAN); any other only under "public", and only at a public address. Either way the name
    // is resolved here, once, and the address connected to.
    let host: string;
    if (allow.allows(target)) {
      const resolved = await resolveHost(split.host, this.options.resolve);
      if ('code' in resolved) return this.refuse(socket, target, '502 Bad Gateway', resolved.code, resolved.words);
      host = resolved.addresses[0];
    } else {
      if (!this.options.public) return this.refuse(socket, target, '403 Forbidden', 'HOST_NOT_ALLOWED', `${target} is not among the hosts skill "${skill}" declares`);
      const checked = await publicAddress(split.host, this.options.resolve);
      if ('code' in checked) return this.refuse(socket, target, checked.code === 'DNS_FAILED' ? '502 Bad Gateway' : '403 Forbidden', checked.code, checked.words);
      host = checked.address;
    }
    if (socket.destroyed) return;
    connectWithin(host, Number(split.port), RELAY_LIMITS.connectMs, (err, upstream) => {
      if (err || !upstream) return this.refuse(socket, target, '502 Bad Gateway', 'CONNECT_FAILED', connectFailure(target, (err as NodeJS.ErrnoException | null)?.code, err?.message).words);
      if (socket.destroyed) return void upstream.destroy();
      this.tunnels++;
      this.options.log.info({ skill, target, address: host }, 'skill relay: tunnel');
      joinTunnel(socket, upstream, head, { idleMs: RELAY_LIMITS.idleMs, maxBytes: RELAY_LIMITS.tunnelBytes, closed: (bytes) => (this.bytes += bytes) });
    });
  }
}
