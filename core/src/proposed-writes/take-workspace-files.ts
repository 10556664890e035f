// propose_write's files `from` the agent's workspace (a chart a run made, a PDF): read from
// the workspace and kept by the core before the person is asked (the same
// reader and checks as a file sent to a chat: files/attach-files.ts), so that what they
// approve is the very bytes written, whatever the agent does to its workspace meanwhile.
// The arguments then name the kept copy (`taken`: its id, kind, size and sha256), which
// the person sees (the console shows the picture) and the write uses.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { Session } from '../boundary/session-table.js';
import { readWorkspaceFile, type AttachDeps } from '../files/attach-files.js';
import type { FileKind } from '../files/file-type.js';
import type { JsonObject } from '../protocol/envelope.js';
import { pipelineError, ToolFailure } from '../protocol/errors.js';
import { MAX_TAKEN_BYTES, type GivenFile, type TakenFile } from './proposed-change.js';

/** propose_write's `args` with each `from` replaced by its kept copy (`args` itself when it has none). */
export async function takeWorkspaceFiles(args: JsonObject, session: Session, files: AttachDeps | undefined): Promise<JsonObject | ToolFailure> {
  const given = args.files as GivenFile[];
  if (!given.some((f) => f.from !== undefined)) return args;
  const refuse = (message: string) => new ToolFailure(pipelineError('VALIDATION_FAILED', message, false, { stage: 5, field: 'files' }));
  if (!files) return refuse('files cannot be taken from the workspace here');
  // Every file is read and checked before any is kept: a proposal refused half way keeps nothing.
  let bytes = 0;
  const reads = new Map<GivenFile, { path: string; bytes: Buffer; kind: FileKind }>();
  for (const file of given) {
    if (file.from === undefined) continue;
    const read = await readWorkspaceFile(file.from, `"${file.path}" from`, session, files);
    if ('why' in read) return refuse(read.why);
    bytes += read.bytes.length;
    if (bytes > MAX_TAKEN_BYTES) return refuse(`at most ${MAX_TAKEN_BYTES / 1024 / 1024} MB of files from the workspace in all`);
    reads.set(file, read);
  }
  const out: JsonObject[] = [];
  for (const file of given) {
    const read = reads.get(file);
    if (!read) {
      out.push(file);
      continue;
    }
    try {
      const ref = files.store.put(session.group, posix.basename(read.path), read.bytes, read.kind);
      const taken: TakenFile = { id: ref.id, type: ref.type, size: ref.size, sha256: createHash('sha256').update(read.bytes).digest('hex') };
      out.push({ path: file.path, taken });
    } catch (err) {
      forgetTaken(out, files);
      return new ToolFailure(pipelineError('PLUGIN_UNAVAILABLE', `the core could not keep "${file.path}" right now (${(err as NodeJS.ErrnoException).code ?? 'error'}); try again later`, true, { stage: 5, field: 'files' }));
    }
  }
  return { ...args, files: out };
}

/** Drops the kept copies of a proposal that wrote nothing (refused, answered no, expired): they would only push other files out of the bounded store. */
export function forgetTaken(files: unknown, store: AttachDeps | undefined): void {
  if (!store || !Array.isArray(files)) return;
  for (const file of files as { taken?: { id?: unknown } }[]) if (typeof file?.taken?.id === 'string') store.store.remove(file.taken.id);
}
