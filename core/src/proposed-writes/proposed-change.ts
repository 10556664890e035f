// What propose_write asks for, checked beyond its schema: files under one area the core
// owns (today `skills/<name>/`, the person's own skills), named without tricks, bounded.
// Nothing here touches the disk: skill-writes.ts reads what is there and applies a yes.
import { posix } from 'node:path';
import type { JsonObject } from '../protocol/envelope.js';
import { pipelineError, ToolFailure } from '../protocol/errors.js';

export const PROPOSE_WRITE_NAME = 'propose_write';
export const MAX_FILES = 20;
export const MAX_FILE_BYTES = 64 * 1024;
export const MAX_TOTAL_BYTES = 256 * 1024;
/** A skill's folder name, as skill discovery takes it. */
export const SKILL_NAME = /^[a-z][a-z0-9-]{0,39}$/;
/** One path segment: letters, digits, `._-`, not starting with a dot (no hidden files, no `..`). */
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/;

export interface ProposedFile {
  /** Inside the skill's folder, e.g. "scripts/fetch.py". */
  path: string;
  content: string;
}

export interface ProposedChange {
  skill: string;
  files: ProposedFile[];
}

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
        required: ['path', 'content'],
        properties: {
          path: { type: 'string', minLength: 1, maxLength: 300, description: 'where the file goes: "skills/<name>/<file>", e.g. "skills/weather/SKILL.md"' },
          content: { type: 'string', maxLength: MAX_FILE_BYTES, description: 'the whole file, as UTF-8 text' },
        },
      },
    },
    why: { type: 'string', minLength: 1, maxLength: 500, description: 'one or two sentences for the person: what the change is for' },
  },
};

function invalid(field: string, message: string): ToolFailure {
  return new ToolFailure(pipelineError('VALIDATION_FAILED', message, false, { stage: 3, field }));
}

/** The change the (schema-valid) arguments propose, or why it cannot be proposed. */
export function proposedChange(args: JsonObject): ProposedChange | ToolFailure {
  const files = args.files as ProposedFile[];
  let skill: string | null = null;
  const seen = new Set<string>();
  let total = 0;
  for (const file of files) {
    const segments = file.path.split('/');
    if (segments[0] !== 'skills' || segments.length < 3) return invalid('files', `"${file.path}": only files of a skill can be proposed, as "skills/<name>/<file>"`);
    if (!SKILL_NAME.test(segments[1])) return invalid('files', `"${segments[1]}": a skill's name is lower-case letters, digits and hyphens, starting with a letter (at most 40)`);
    if (skill !== null && segments[1] !== skill) return invalid('files', 'one skill per proposal');
    skill = segments[1];
    const inside = segments.slice(2);
    if (!inside.every((s) => SEGMENT.test(s)) || posix.normalize(inside.join('/')) !== inside.join('/')) {
      return invalid('files', `"${file.path}": each part of a path is letters, digits, ".", "_" or "-", not starting with a dot`);
    }
    if (seen.has(inside.join('/'))) return invalid('files', `"${file.path}" is named twice`);
    seen.add(inside.join('/'));
    const bytes = Buffer.byteLength(file.content);
    if (bytes > MAX_FILE_BYTES) return invalid('files', `"${file.path}": at most ${MAX_FILE_BYTES / 1024} KB a file`);
    total += bytes;
  }
  if (total > MAX_TOTAL_BYTES) return invalid('files', `at most ${MAX_TOTAL_BYTES / 1024} KB in all`);
  return { skill: skill!, files: files.map((f) => ({ path: f.path.split('/').slice(2).join('/'), content: f.content })) };
}
