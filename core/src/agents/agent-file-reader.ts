// A file of an agent's workspace, read for the core (a file sent to a chat, a document
// proposed `from` the workspace) through the engine's archive API. The engine reads as
// root, in its own view of the container, and follows a folder link anywhere on the path
// (`etc-link/shadow` would be a file the agent itself cannot read): so each folder on the
// way is first looked at (HEAD, the engine's stat without following the last part) and a
// link refuses the read. A link swapped in between that look and the read is not caught:
// README says so. (Not `head` run as the agent: under gVisor, reads of a few large files
// that way stopped the agent's Claude Code.)
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { WORKSPACE, type FileRead } from '../files/attach-files.js';

/** Go's os.FileMode type bits, in the engine's stat of a path: a link, and any kind but a regular file (folder, fifo, socket, device). */
const MODE_SYMLINK = 27;
const NOT_REGULAR = [31, 27, 26, 25, 24, 21, 19];
const bit = (mode: number, n: number): boolean => Math.floor(mode / 2 ** n) % 2 === 1;

/** The engine's stat of `path` (its last part not followed), or null where there is none. */
async function stat(container: Docker.Container, path: string): Promise<{ mode: number; linkTarget?: string } | null> {
  const res = (await container.infoArchive({ path }).catch((err: { statusCode?: number }) => {
    if (err.statusCode === 404) return null;
    throw err;
  })) as { headers?: Record<string, string | undefined> } | null;
  const header = res?.headers?.['x-docker-container-path-stat'];
  return header ? (JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { mode: number; linkTarget?: string }) : null;
}


export async function readAgentFile(docker: Docker, id: string, path: string, maxBytes: number): Promise<FileRead> {
  const container = docker.getContainer(id);
  const parts = path.slice(WORKSPACE.length + 1).split('/');
  let archive: NodeJS.ReadableStream;
  try {
    for (let i = 1; i <= parts.length; i++) {
      const found = await stat(container, `${WORKSPACE}/${parts.slice(0, i).join('/')}`);
      if (!found) return { ok: false, why: 'not_found' };
      if (i < parts.length && (bit(found.mode, MODE_SYMLINK) || found.linkTarget)) return { ok: false, why: 'outside' };
      if (i === parts.length && NOT_REGULAR.some((n) => bit(found.mode, n))) return { ok: false, why: 'not_a_file' };
    }
    archive = (await container.getArchive({ path })) as NodeJS.ReadableStream;
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode;
    return status === 404 ? { ok: false, why: 'not_found' } : { ok: false, why: 'unreadable', detail: (err as Error).message };
  }
  const extract = tar.extract();
  archive.pipe(extract);
  try {
    for await (const entry of extract) {
      const { type, size = 0 } = entry.header;
      if (type !== 'file') return { ok: false, why: 'not_a_file', detail: `${type}` };
      if (size > maxBytes) return { ok: false, why: 'too_large', detail: `${size} bytes` };
      const chunks: Buffer[] = [];
      let read = 0;
      for await (const chunk of entry as AsyncIterable<Buffer>) {
        read += chunk.length;
        if (read > maxBytes) return { ok: false, why: 'too_large', detail: `over ${maxBytes} bytes` };
        chunks.push(chunk);
      }
      return { ok: true, bytes: Buffer.concat(chunks) };
    }
    return { ok: false, why: 'not_found' };
  } catch (err) {
    return { ok: false, why: 'unreadable', detail: (err as Error).message };
  } finally {
    extract.destroy();
    (archive as NodeJS.ReadableStream & { destroy?(): void }).destroy?.();
  }
}
