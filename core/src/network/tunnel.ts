// The two halves every CONNECT relay here shares (the plugins' relay, the egress service,
// a skill's relay): a TCP connection opened within a time bound, and a client joined to
// its upstream once answered 200, both closed together, each closed when idle, and the
// bytes carried held to a bound where one is given.
import { connect, type Socket } from 'node:net';

export interface TunnelBounds {
  /** A tunnel with no traffic either way for this long is closed. */
  idleMs: number;
  /** Bytes carried, both ways together; past it the tunnel is closed. */
  maxBytes?: number;
  /** Told once, when the tunnel closes: the bytes it carried and whether the byte bound closed it. */
  closed?: (bytes: number, overLimit: boolean) => void;
}

/** Connects to host:port (a name, or an address, IPv6 without brackets); `done` hears once. */
export function connectWithin(host: string, port: number, timeoutMs: number, done: (err: Error | null, upstream?: Socket) => void): void {
  let called = false;
  const once = (err: Error | null, upstream?: Socket): void => {
    if (called) return;
    called = true;
    done(err, upstream);
  };
  const upstream = connect({ host: host.replace(/^\[|\]$/g, ''), port, timeout: timeoutMs });
  upstream.once('connect', () => {
    upstream.setTimeout(0);
    once(null, upstream);
  });
  upstream.once('timeout', () => upstream.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })));
  upstream.once('error', (err) => once(err));
}

/** Answers the client 200 and joins it to `upstream`; `head` is what the client sent past its CONNECT. */
export function joinTunnel(client: Socket, upstream: Socket, head: Buffer, bounds: TunnelBounds): void {
  let bytes = 0;
  let over = false;
  let ended = false;
  const close = (): void => {
    client.destroy();
    upstream.destroy();
    if (ended) return;
    ended = true;
    bounds.closed?.(bytes, over);
  };
  const count = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bounds.maxBytes !== undefined && bytes > bounds.maxBytes && !over) {
      over = true;
      close();
    }
  };
  client.on('error', () => undefined);
  upstream.on('error', () => undefined);
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) {
    count(head);
    upstream.write(head);
  }
  for (const s of [client, upstream]) {
    s.setTimeout(bounds.idleMs, close);
    s.on('close', close);
    s.on('data', count);
  }
  client.pipe(upstream).pipe(client);
}
