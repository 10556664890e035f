// A run's checked files into the group's workspace, under runs/<run-id>/, as the agent's
// own user. The core builds the archive itself (regular files and their folders only,
// uid/gid 1000, 0644 and 0755) and `tar` extracts it inside the agent's container as uid
// 1000, in its mount namespace: the write has exactly the agent's powers (its workspace,
// held to its quota; a link the agent planted leads nowhere it could not write itself).
// Not the engine's putArchive: the engine extracts as root in its own view of the container,
// where the read-only root is writable and a `runs` link planted by the agent is followed.
import { posix } from 'node:path';
import type Docker from 'dockerode';
import tar from 'tar-stream';
import type { OutputFile } from './collect-outputs.js';
import { execWithInput } from './run-exec.js';

/** Where the agent's container has the workspace (files/attach-files.ts says the same). */
const AGENT_WORKSPACE = '/workspace/group';
const WRITE_MS = 30_000;

export type Written = { ok: true } | { ok: false; reason: string };

/** The archive: runs/, runs/<id>/, each file's folders, then the files. */
export async function outputsArchive(runId: string, files: OutputFile[]): Promise<Buffer> {
  const pack = tar.pack();
  const owner = { uid: 1000, gid: 1000, uname: 'node', gname: 'node', mtime: new Date() };
  const folders = new Set<string>(['runs', `runs/${runId}`]);
  for (const file of files) {
    for (let dir = posix.dirname(file.name); dir !== '.'; dir = posix.dirname(dir)) folders.add(`runs/${runId}/${dir}`);
  }
  for (const dir of [...folders].sort()) pack.entry({ ...owner, name: `${dir}/`, type: 'directory', mode: 0o755 });
  for (const file of files) pack.entry({ ...owner, name: `runs/${runId}/${file.name}`, type: 'file', mode: 0o644, size: file.bytes.length }, file.bytes);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

export async function writeOutputs(docker: Docker, agentContainer: string, runId: string, files: OutputFile[]): Promise<Written> {
  const archive = await outputsArchive(runId, files);
  try {
    const r = await execWithInput(docker, agentContainer, ['tar', '-x', '-f', '-', '-C', AGENT_WORKSPACE, '--no-same-owner', '--no-same-permissions', '-m'], archive, WRITE_MS);
    if (r.exitCode === 0) return { ok: true };
    // Half written (a full workspace): what came through goes again, so nothing half is left.
    await execWithInput(docker, agentContainer, ['rm', '-rf', '--', `${AGENT_WORKSPACE}/runs/${runId}`], Buffer.alloc(0), WRITE_MS).catch(() => undefined);
    const why = r.exitCode === null ? `not written within ${WRITE_MS / 1000} s` : r.stderr.trim().split('\n').at(-1) ?? `tar exited ${r.exitCode}`;
    return { ok: false, reason: `could not be written into the workspace (${why})` };
  } catch (err) {
    return { ok: false, reason: `could not be written into the workspace (${(err as Error).message})` };
  }
}
