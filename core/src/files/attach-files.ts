// A tool's file arguments (manifest `file_arguments`): the agent names a file in its
// workspace; just before the call is routed, the core reads that file from the agent's
// workspace (a container holding only it, no link on the way: agents/agent-file-reader.ts), checks it (a regular
// file in /workspace/group, at most MAX_FILE_BYTES, a kind a person can open: file-type.ts),
// keeps it (file-store.ts) and hands the plugin a FileRef instead of the path. The plugin
// never reads an agent's workspace, and the person never gets what the core did not check.
import { posix } from 'node:path';
import type { Session } from '../boundary/session-table.js';
import type { ToolEntry } from '../plugins/discovery.js';
import { pipelineError, type ErrorPayload } from '../protocol/errors.js';
import type { FileStore } from './file-store.js';
import { fileKind, type FileKind } from './file-type.js';

export const WORKSPACE = '/workspace/group';
export const MAX_FILE_BYTES = 10 * 1024 * 1024;

export type FileRead =
  | { ok: true; bytes: Buffer }
  | { ok: false; why: 'not_found' | 'not_a_file' | 'outside' | 'too_large' | 'unreadable'; detail?: string };

/** Reads one regular file of a container, at most `maxBytes` (the runtime's readFile). */
export type ReadAgentFile = (container: string, path: string, maxBytes: number) => Promise<FileRead>;

export interface AttachDeps {
  read: ReadAgentFile;
  store: FileStore;
}

/** `given` as an absolute path inside the workspace, or null if it leads anywhere else. */
export function workspacePath(given: string): string | null {
  if (given.includes('\0')) return null;
  const path = posix.resolve(WORKSPACE, given);
  return path.startsWith(`${WORKSPACE}/`) ? path : null;
}

const WHY: Record<Exclude<FileRead, { ok: true }>['why'], string> = {
  not_found: 'no such file in the workspace',
  not_a_file: 'not a regular file (a folder or a symbolic link)',
  outside: 'goes through a symbolic link (a folder on the way): links are not followed',
  too_large: `larger than ${MAX_FILE_BYTES / 1024 / 1024} MB`,
  unreadable: 'could not be read from the agent\'s container',
};

/** The file `given` names in the session's workspace, checked: its bytes and kind, or why not (for `field`). */
export async function readWorkspaceFile(given: unknown, field: string, session: Session, deps: AttachDeps): Promise<{ path: string; bytes: Buffer; kind: FileKind } | { why: string; detail?: string }> {
  const path = typeof given === 'string' ? workspacePath(given) : null;
  if (path === null) return { why: `${field}: a file in ${WORKSPACE} (a path inside it, relative or absolute)` };
  if (!session.container) return { why: 'files cannot be taken from this session' };
  const read = await deps.read(session.container, path, MAX_FILE_BYTES);
  if (!read.ok) return { why: `${field}: ${path}: ${WHY[read.why]}`, detail: read.detail };
  const kind = fileKind(read.bytes);
  if (!kind) return { why: `${field}: ${path}: not a kind of file that can be sent (PNG, JPEG, GIF, WebP, PDF or UTF-8 text)` };
  return { path, bytes: read.bytes, kind };
}

/** The arguments with each file argument replaced by its FileRef, or the error to answer. */
export async function attachFiles(tool: Pick<ToolEntry, 'file_arguments'>, args: Record<string, unknown>, session: Session, deps: AttachDeps | undefined): Promise<{ args: Record<string, unknown>; attached: string[] } | { error: ErrorPayload; detail?: string }> {
  const names = (tool.file_arguments ?? []).filter((name) => args[name] !== undefined);
  if (names.length === 0) return { args, attached: [] };
  const refuse = (field: string, message: string, detail?: string) => ({ error: pipelineError('VALIDATION_FAILED', message, false, { stage: 6, field }), detail });
  if (!deps || !session.container) return refuse(names[0], 'files cannot be sent from this session');
  const out = { ...args };
  const attached: string[] = [];
  for (const name of names) {
    const read = await readWorkspaceFile(args[name], name, session, deps);
    if ('why' in read) return refuse(name, read.why, read.detail);
    const { path, bytes, kind } = read;
    try {
      const ref = deps.store.put(session.group, posix.basename(path), bytes, kind);
      out[name] = ref;
      attached.push(`${path} as ${ref.id} (${ref.type}, ${ref.size} bytes)`);
    } catch (err) {
      return { error: pipelineError('PLUGIN_UNAVAILABLE', `${name}: the core could not keep the file right now (${(err as NodeJS.ErrnoException).code ?? 'error'}); try again later`, true, { stage: 6, field: name }) };
    }
  }
  return { args: out, attached };
}
