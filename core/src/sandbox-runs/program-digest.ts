// What program a run ran, for the audit log: its size, modification time and SHA-256, read
// from the sandbox's read-only /workspace through the engine's archive API just before the
// run starts. Reading it costs ~50 ms and holds the engine's lock on the container (an exec
// beside it waits), so a sandbox's digest of a file is reused while the engine's stat of it
// (~1 ms) shows the same size and modification time. An agent that puts a file's mtime back
// (`touch -d`) and keeps its size can make Activity show the earlier digest: the digest says
// what was read, and when.
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { enginePathStat } from '../agents/engine-path-stat.js';
import { WORKSPACE_DIR } from './container-spec.js';

/** A program larger than this is still run; its digest is not taken. */
const DIGEST_MAX_BYTES = 8 * 1024 * 1024;
/** Digests remembered, across sandboxes; the oldest go first. */
const REMEMBERED = 256;

export interface ProgramDigest {
  bytes: number;
  mtime: string;
  sha256: string | null;
  /** Taken before an earlier run in this sandbox, the file unchanged since by its stat. */
  reused: boolean;
}

async function sha256(docker: Docker, container: string, path: string): Promise<string | null> {
  let archive: NodeJS.ReadableStream;
  try {
    archive = (await docker.getContainer(container).getArchive({ path })) as NodeJS.ReadableStream;
  } catch {
    return null;
  }
  const extract = tar.extract();
  archive.pipe(extract);
  try {
    for await (const entry of extract) {
      if (entry.header.type !== 'file' || (entry.header.size ?? 0) > DIGEST_MAX_BYTES) {
        entry.resume();
        return null;
      }
      const hash = createHash('sha256');
      for await (const chunk of entry as AsyncIterable<Buffer>) hash.update(chunk);
      return hash.digest('hex');
    }
    return null;
  } catch {
    return null;
  } finally {
    extract.destroy();
    (archive as NodeJS.ReadableStream & { destroy?(): void }).destroy?.();
  }
}

export class ProgramDigests {
  private readonly known = new Map<string, ProgramDigest>();

  constructor(private readonly docker: Docker) {}

  /** The program as the sandbox has it now; null when it is not there (the run then says so itself). */
  async of(sandbox: string, program: string, dir = WORKSPACE_DIR): Promise<ProgramDigest | null> {
    const path = `${dir}/${program}`;
    // Any failure of the engine counts as not there: the run then says so itself.
    const now = await enginePathStat(this.docker.getContainer(sandbox), path).catch(() => null);
    if (!now) return null;
    const key = `${sandbox} ${program}`;
    const before = this.known.get(key);
    if (before && before.bytes === now.size && before.mtime === now.mtime) return { ...before, reused: true };
    const digest: ProgramDigest = { bytes: now.size, mtime: now.mtime, sha256: await sha256(this.docker, sandbox, path), reused: false };
    this.known.delete(key);
    this.known.set(key, digest);
    if (this.known.size > REMEMBERED) this.known.delete(this.known.keys().next().value!);
    return digest;
  }
}
