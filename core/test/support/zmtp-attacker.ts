// A hostile session peer speaking raw ZMTP 3.1 (NULL, as a DEALER) over the unix socket,
// as plain JavaScript source so that it runs the same inside an agent container
// (`node -e`, as uid 1000), as a local child process in integration tests, and in the
// benchmark. No Jest here: the benchmark imports it.
//
// ATTACK_MODE:
//   flood        one connection, sends unknown-topic requests as fast as the socket takes
//                them, reads every reply and tallies the error codes
//   unread       one connection, sends up to ATTACK_COUNT echo requests with
//                ATTACK_TEXT_BYTES of text and never reads a byte of the replies
//   connections  opens up to ATTACK_COUNT connections (each completes the handshake)
//                and holds them
// Runs until the core closes every connection or ATTACK_DURATION_MS passes; prints one
// JSON line: {mode, sent, replies, codes, opened, closed, ms}, also written to ATTACK_OUT
// (if set) on the first RATE_LIMITED and when the core hangs up.
import { spawn } from 'node:child_process';

export type AttackMode = 'flood' | 'unread' | 'connections';

export interface AttackResult {
  mode: AttackMode;
  sent: number;
  replies: number;
  codes: Record<string, number>;
  opened: number;
  /** Connections the core closed (or refused) while the attack ran. */
  closed: number;
  ms: number;
}

export const ATTACKER_SOURCE = String.raw`
const net = require('node:net');
const env = process.env;
const path = env.ATTACK_SOCKET || '/run/carapace/carapace.sock';
const mode = env.ATTACK_MODE || 'flood';
const duration = Number(env.ATTACK_DURATION_MS || 5000);
const count = Number(env.ATTACK_COUNT || 2000);
const textBytes = Number(env.ATTACK_TEXT_BYTES || 200000);
const t0 = Date.now();
const out = { mode, sent: 0, replies: 0, codes: {}, opened: 0, closed: 0, ms: 0 };
let live = 0;
let finished = false;
const sockets = [];

function frame(flags, body) {
  const long = body.length > 255;
  const head = Buffer.alloc(long ? 9 : 2);
  head[0] = flags | (long ? 2 : 0);
  if (long) head.writeBigUInt64BE(BigInt(body.length), 1); else head[1] = body.length;
  return Buffer.concat([head, body]);
}
function hello() {
  const g = Buffer.alloc(64);
  Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 1]).copy(g);
  g.write('NULL', 12);
  const name = Buffer.from('Socket-Type'), value = Buffer.from('DEALER');
  const len = Buffer.alloc(4); len.writeUInt32BE(value.length);
  const ready = Buffer.concat([Buffer.from([5]), Buffer.from('READY'), Buffer.from([name.length]), name, len, value]);
  return Buffer.concat([g, frame(4, ready)]);
}
function request(i) {
  const body = mode === 'unread'
    ? JSON.stringify({ topic: 'tool.invoke.echo', correlation: 'u' + i, arguments: { text: 'x'.repeat(textBytes) } })
    : JSON.stringify({ topic: 'tool.invoke.no_such_tool', correlation: 'f' + i, arguments: {} });
  return frame(0, Buffer.from(body));
}
// In a container that may be stopped under it: what it saw so far, written as it happens.
function record() {
  out.ms = Date.now() - t0;
  const fs = require('node:fs');
  // Written aside and renamed: a container stopped mid-write leaves the last whole record.
  if (env.ATTACK_OUT) try { fs.writeFileSync(env.ATTACK_OUT + '.tmp', JSON.stringify(out)); fs.renameSync(env.ATTACK_OUT + '.tmp', env.ATTACK_OUT); } catch {}
}
function finish() {
  if (finished) return;
  finished = true;
  record();
  for (const s of sockets) s.destroy();
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}
setTimeout(finish, duration);

// Reads the greeting, READY and message frames; calls onMessage(body) per message frame.
function reader(sock, onReady, onMessage) {
  let buf = Buffer.alloc(0), greeted = false, ready = false;
  sock.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    if (!greeted) { if (buf.length < 64) return; buf = buf.subarray(64); greeted = true; }
    for (;;) {
      if (buf.length < 2) return;
      const flags = buf[0], long = flags & 2;
      const head = long ? 9 : 2;
      if (buf.length < head) return;
      const size = long ? Number(buf.readBigUInt64BE(1)) : buf[1];
      if (buf.length < head + size) return;
      const body = buf.subarray(head, head + size);
      buf = buf.subarray(head + size);
      if (flags & 4) {
        if (!ready && body.subarray(1, 6).toString() === 'READY') { ready = true; onReady(); }
        else if (body.subarray(1, 5).toString() === 'PING') sock.write(frame(4, Buffer.concat([Buffer.from([4]), Buffer.from('PONG'), body.subarray(7)])));
      } else onMessage(body);
    }
  });
}

function connect(onReady, onMessage) {
  const sock = net.connect(path);
  sockets.push(sock);
  let up = false;
  sock.on('connect', () => { up = true; live++; out.opened++; sock.write(hello()); });
  sock.on('error', () => {});
  sock.on('close', () => {
    if (finished) return;
    out.closed++;
    if (up) live--;
    if (mode !== 'connections') record();
    // Done once the core has closed everything we held (or refuses us outright).
    if (live === 0 && (mode !== 'connections' || out.opened > 0 || !require('node:fs').existsSync(path))) setTimeout(finish, 50);
  });
  reader(sock, () => onReady(sock), onMessage);
  return sock;
}

if (mode === 'flood') {
  let i = 0;
  connect((sock) => {
    const pump = () => {
      while (!finished && !sock.destroyed) {
        out.sent++;
        if (!sock.write(request(i++))) return sock.once('drain', pump);
      }
    };
    pump();
  }, (body) => {
    out.replies++;
    try { const r = JSON.parse(body.toString()); const code = r.payload && r.payload.error ? r.payload.error.code : 'ok'; out.codes[code] = (out.codes[code] || 0) + 1; if (code === 'RATE_LIMITED' && out.codes[code] === 1) record(); } catch { out.codes.unparsed = (out.codes.unparsed || 0) + 1; }
  });
} else if (mode === 'unread') {
  let i = 0;
  connect((sock) => {
    sock.pause(); // never read again: replies pile up on the core's side
    const pump = () => {
      while (!finished && !sock.destroyed && out.sent < count) {
        out.sent++;
        if (!sock.write(request(i++))) return sock.once('drain', pump);
      }
    };
    pump();
    // Not reading, it would never see the core hang up: a PING now and then fails once it has.
    const ping = frame(4, Buffer.concat([Buffer.from([4]), Buffer.from('PING'), Buffer.from([0, 0])]));
    setInterval(() => { if (!sock.destroyed && out.sent >= count) sock.write(ping); }, 100).unref();
  }, () => { out.replies++; });
} else {
  let started = 0;
  const more = () => {
    if (finished) return;
    for (let k = 0; k < 50 && started < count; k++, started++) connect(() => {}, () => {});
    if (started < count) setTimeout(more, 1);
  };
  more();
}
`;

/** Runs the attacker as a local process against `socketPath`. */
export function attackLocally(socketPath: string, mode: AttackMode, env: Record<string, string | number> = {}): Promise<AttackResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', ATTACKER_SOURCE], {
      env: { PATH: process.env.PATH, ATTACK_SOCKET: socketPath, ATTACK_MODE: mode, ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', reject);
    child.once('exit', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '') as AttackResult);
      } catch {
        reject(new Error(`attacker printed no result: ${out} ${err}`));
      }
    });
  });
}
