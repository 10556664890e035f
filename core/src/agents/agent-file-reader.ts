// A file of an agent's workspace, read for the core (a file sent to a chat, a document
// proposed `from` the workspace) through the engine's archive API, in a reader container
// that holds only the workspace (workspace-reader.ts): the engine reads as root and
// follows a folder link anywhere on the path, and there it finds nothing but the workspace
// and an empty image. Each folder on the way is looked at first (HEAD, the engine's stat
// without following the last part), so that a link is refused with its reason. (Not
// `head` run as the agent: under gVisor, reads of a few large files that way stopped the
// agent's Claude Code.)
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { WORKSPACE, type FileRead } from '../files/attach-files.js';
import { enginePathStat } from './engine-path-stat.js';
import { withWorkspaceReader } from './workspace-reader.js';

/** Go's os.FileMode type bits, in the engine's stat of a path: a link, and any kind but a regular file (folder, fifo, socket, device). */
const MODE_SYMLINK = 27;
const NOT_REGULAR = [31, 27, 26, 25, 24, 21, 19];
const bit = (mode: number, n: number): boolean => Math.floor(mode / 2 ** n) % 2 === 1;

export async function readAgentFile(docker: Docker, id: string, path: string, maxBytes: number): Promise<FileRead> {
  try {
    return await withWorkspaceReader(docker, id, (reader) => readFrom(reader, path, maxBytes));
  } catch (err) {
    return { ok: false, why: 'unreadable', detail: (err as Error).message };
  }
}

async function readFrom(container: Docker.Container, path: string, maxBytes: number): Promise<FileRead> {
  const parts = path.slice(WORKSPACE.length + 1).split('/');
  let archive: NodeJS.ReadableStream;
  try {
    for (let i = 1; i <= parts.length; i++) {
      const found = await enginePathStat(container, `${WORKSPACE}/${parts.slice(0, i).join('/')}`);
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
