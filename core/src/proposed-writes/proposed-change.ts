// What propose_write asks for, checked beyond its schema: files in one of the places the
// core owns outside any workspace (`skills/<name>/`, the person's own skills, or
// `documents/`, the person's documents folder), named without tricks, bounded. Nothing
// here touches the disk: proposed-places.ts reads what is there and applies a yes.
import { posix } from 'node:path';
import type { JsonObject } from '../protocol/envelope.js';
import { pipelineError, ToolFailure } from '../protocol/errors.js';

export const PROPOSE_WRITE_NAME = 'propose_write';
export const MAX_FILES = 20;
export const MAX_FILE_BYTES = 64 * 1024;
export const MAX_TOTAL_BYTES = 256 * 1024;
/** Files taken from the workspace (`from`: a chart, a PDF) in one proposal, in all. */
export const MAX_TAKEN_BYTES = 32 * 1024 * 1024;
/** A skill's folder name, as skill discovery takes it. */
export const SKILL_NAME = /^[a-z][a-z0-9-]{0,39}$/;
/** One path segment: letters, digits, `._-`, not starting with a dot (no hidden files, no `..`). */
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/;
/** Folders deep, under the place's own folder. */
const MAX_DEPTH = 8;

/** A file of the agent's workspace the core read and kept before the person was asked (take-workspace-files.ts): written as kept. */
export interface TakenFile {
  /** In the core's file store. */
  id: string;
  type: string;
  size: number;
  sha256: string;
}

/** Inside the skill's folder ("scripts/fetch.py") or the documents folder ("notes/shopping.md"): its text, or a file taken from the workspace. */
export type ProposedFile = { path: string; content: string } | { path: string; taken: TakenFile };

/** As the agent sends it: the text, or (documents only) a file of its workspace to take (`from`). */
export type GivenFile = { path: string; content?: string; from?: string; taken?: TakenFile };

/** One proposal writes into one place: a skill's folder, or the documents folder. */
export type ProposedChange = { place: 'skills'; skill: string; files: ProposedFile[] } | { place: 'documents'; files: ProposedFile[] };

export const proposeWriteSchema: JsonObject = {
  type: 'object',
  additionalProperties: false,
  required: ['files', 'why'],
  properties: {
    files: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_FILES,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['path'],
        properties: {
          path: { type: 'string', minLength: 1, maxLength: 300, description: 'where the file goes: "skills/<name>/<file>" (e.g. "skills/weather/SKILL.md") or "documents/<path>" (e.g. "documents/notes/shopping.md")' },
          content: { type: 'string', maxLength: MAX_FILE_BYTES, description: 'the whole file, as UTF-8 text' },
          from: { type: 'string', minLength: 1, maxLength: 300, description: 'instead of content, for documents only: a file of your workspace to save there as it is (a chart, a PDF; e.g. "out/chart.png")' },
        },
      },
    },
    why: { type: 'string', minLength: 1, maxLength: 500, description: 'one or two sentences for the person: what the change is for' },
  },
};

function invalid(field: string, message: string): ToolFailure {
  return new ToolFailure(pipelineError('VALIDATION_FAILED', message, false, { stage: 3, field }));
}

/** Why the (schema-valid) arguments cannot be proposed, or null: stage 3, before a `from` is taken. */
export function proposalProblem(args: JsonObject): ToolFailure | null {
  const parsed = parse(args);
  return parsed instanceof ToolFailure ? parsed : null;
}

/** The change the arguments propose, every `from` taken (take-workspace-files.ts), or why it cannot be made. */
export function proposedChange(args: JsonObject): ProposedChange | ToolFailure {
  const parsed = parse(args);
  if (parsed instanceof ToolFailure) return parsed;
  // A `from` is taken before the person is asked (the pipeline): one left here was never read.
  if (parsed.files.some((f) => 'from' in f)) return invalid('files', 'a file "from" the workspace was not taken before the person was asked; nothing was written');
  const files = parsed.files as ProposedFile[];
  return parsed.place === 'skills' ? { place: 'skills', skill: parsed.skill, files } : { place: 'documents', files };
}

type Parsed = { place: 'skills'; skill: string; files: WithinFile[] } | { place: 'documents'; files: WithinFile[] };
type WithinFile = ProposedFile | { path: string; from: string };

function parse(args: JsonObject): Parsed | ToolFailure {
  const files = args.files as GivenFile[];
  let folder: string | null = null; // "skills/<name>" or "documents": one per proposal
  const seen = new Set<string>();
  let total = 0;
  let taken = 0;
  for (const file of files) {
    const segments = file.path.split('/');
    const place = segments[0];
    if (place === 'skills') {
      if (segments.length < 3) return invalid('files', `"${file.path}": a skill's file is "skills/<name>/<file>"`);
      if (!SKILL_NAME.test(segments[1])) return invalid('files', `"${segments[1]}": a skill's name is lower-case letters, digits and hyphens, starting with a letter (at most 40)`);
    } else if (place === 'documents') {
      if (segments.length < 2) return invalid('files', `"${file.path}": a document is "documents/<path>"`);
    } else {
      return invalid('files', `"${file.path}": only a skill's files ("skills/<name>/<file>") or documents ("documents/<path>") can be proposed`);
    }
    const at = place === 'skills' ? 2 : 1;
    const here = segments.slice(0, at).join('/');
    if (folder !== null && here !== folder) return invalid('files', place === 'skills' && folder.startsWith('skills/') ? 'one skill per proposal' : 'one place per proposal: a skill, or documents');
    folder = here;
    const inside = segments.slice(at);
    if (!inside.every((s) => SEGMENT.test(s)) || posix.normalize(inside.join('/')) !== inside.join('/')) {
      return invalid('files', `"${file.path}": each part of a path is letters, digits, ".", "_" or "-", not starting with a dot`);
    }
    if (inside.length > MAX_DEPTH) return invalid('files', `"${file.path}": at most ${MAX_DEPTH} levels deep`);
    if (seen.has(inside.join('/'))) return invalid('files', `"${file.path}" is named twice`);
    seen.add(inside.join('/'));
    const given = [file.content, file.from, file.taken].filter((v) => v !== undefined).length;
    if (given !== 1) return invalid('files', `"${file.path}": give its content, or (documents only) the workspace file it is "from"`);
    if (file.content === undefined && place !== 'documents') return invalid('files', `"${file.path}": a skill's files are proposed as text (content), so that the person reads them`);
    if (file.content !== undefined) {
      const bytes = Buffer.byteLength(file.content);
      if (bytes > MAX_FILE_BYTES) return invalid('files', `"${file.path}": at most ${MAX_FILE_BYTES / 1024} KB a file`);
      total += bytes;
    }
    taken += file.taken?.size ?? 0;
  }
  if (total > MAX_TOTAL_BYTES) return invalid('files', `at most ${MAX_TOTAL_BYTES / 1024} KB of text in all`);
  if (taken > MAX_TAKEN_BYTES) return invalid('files', `at most ${MAX_TAKEN_BYTES / 1024 / 1024} MB of files from the workspace in all`);
  const [place, skill] = folder!.split('/');
  const within = files.map((f): WithinFile => {
    const path = f.path.split('/').slice(place === 'skills' ? 2 : 1).join('/');
    return f.content !== undefined ? { path, content: f.content } : f.taken ? { path, taken: f.taken } : { path, from: f.from! };
  });
  return place === 'skills' ? { place, skill, files: within } : { place: 'documents', files: within };
}
