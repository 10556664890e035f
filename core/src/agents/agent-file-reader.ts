// A file of an agent's workspace, read for the core (a file sent to a chat, a document
// proposed `from` the workspace) with exactly the agent's powers: `head` run as uid 1000
// in the agent's own container. Not the engine's archive API: it reads as root, in its own
// view of the container, and follows a folder link the agent planted anywhere in the
// container (`etc-link/shadow`: a file the agent itself cannot read). Here a path that
// leads out of the workspace is refused, and whatever a race with the agent does, it gets
// no more than the agent could `cat` itself. Bounded: the bytes (one more tells "too
// large"), the time (a fifo swapped in after the checks would hold `head` for ever).
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import type { FileRead } from '../files/attach-files.js';

const AGENT_USER = '1000:1000';
const READ_MS = 20_000;
/** The checks' answers ($1 the path, $2 how many bytes to read at most). */
const NOT_FOUND = 72;
const NOT_A_FILE = 73;
const OUTSIDE = 74;
const READER = [
  `if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit ${NOT_FOUND}; fi`,
  `if [ -L "$1" ] || [ ! -f "$1" ]; then exit ${NOT_A_FILE}; fi`,
  `r=$(realpath -e -- "$1") || exit ${NOT_FOUND}`,
  `case "$r" in /workspace/group/*) ;; *) exit ${OUTSIDE} ;; esac`,
  'exec head -c "$2" -- "$r"',
].join('\n');

export async function readAgentFile(docker: Docker, id: string, path: string, maxBytes: number, timeoutMs = READ_MS): Promise<FileRead> {
  let exec: Docker.Exec;
  let stream: NodeJS.ReadWriteStream;
  try {
    exec = await docker.getContainer(id).exec({ Cmd: ['sh', '-c', READER, 'read', path, String(maxBytes + 1)], User: AGENT_USER, AttachStdout: true, AttachStderr: true });
    stream = (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadWriteStream;
  } catch (err) {
    return { ok: false, why: 'unreadable', detail: (err as Error).message };
  }
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  const chunks: Buffer[] = [];
  let size = 0;
  let tail = '';
  const end = (): void => (stream as NodeJS.ReadWriteStream & { destroy(): void }).destroy();
  stdout.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= maxBytes) chunks.push(chunk);
    else end(); // a file over the bound, or more than `head` would write: read no further
  });
  stderr.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString('utf8')).slice(-500)));
  let timer: NodeJS.Timeout | undefined;
  const ended = new Promise<boolean>((resolve) => {
    for (const event of ['end', 'close', 'error']) stream.on(event, () => resolve(true));
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const inTime = await ended;
  clearTimeout(timer);
  if (size > maxBytes) return { ok: false, why: 'too_large', detail: `over ${maxBytes} bytes` };
  if (!inTime) {
    end();
    return { ok: false, why: 'unreadable', detail: `not read within ${timeoutMs / 1000} s` };
  }
  const code = (await exec.inspect().catch(() => null))?.ExitCode ?? null;
  if (code === 0) return { ok: true, bytes: Buffer.concat(chunks) };
  if (code === NOT_FOUND) return { ok: false, why: 'not_found' };
  if (code === NOT_A_FILE) return { ok: false, why: 'not_a_file' };
  if (code === OUTSIDE) return { ok: false, why: 'outside' };
  return { ok: false, why: 'unreadable', detail: tail.trim() || `exit ${code}` };
}
