// A raw CONNECT client for a relay on a unix socket (or a TCP proxy): the status line, the
// headers and the socket, as a run inside a skill's sandbox would see them. No Jest here.
import { connect, type Socket } from 'node:net';

export interface ConnectAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  socket: Socket;
}

/** Sends CONNECT `target` on `path` (a unix socket, or {host, port}) and reads the answer's head (and a refusal's body). */
export function connectThrough(path: string | { host: string; port: number }, target: string, timeoutMs = 20_000): Promise<ConnectAnswer> {
  return new Promise((resolve, reject) => {
    const socket = typeof path === 'string' ? connect(path) : connect(path.port, path.host);
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer to CONNECT ${target} within ${timeoutMs} ms`));
    }, timeoutMs);
    const parse = (final: boolean): boolean => {
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) {
        if (final) {
          clearTimeout(timer);
          reject(new Error(`closed without an answer to CONNECT ${target} (${got.length} bytes)`));
        }
        return false;
      }
      const [line, ...rest] = got.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(line.split(' ')[1]);
      if (status === 200 && !final) {
        clearTimeout(timer);
        socket.removeAllListeners('data');
        socket.removeAllListeners('end');
        resolve({ status, headers: headersOf(rest), body: '', socket });
        return true;
      }
      if (!final) return false;
      clearTimeout(timer);
      resolve({ status, headers: headersOf(rest), body: got.subarray(end + 4).toString('utf8'), socket });
      return true;
    };
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      parse(false);
    });
    socket.on('end', () => parse(true));
    socket.on('close', () => parse(true));
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

function headersOf(lines: string[]): Record<string, string> {
  return Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
}
