// propose_write, the core's tool for writing where the agent cannot (DESIGN 17): a skill's
// files or the person's documents, proposed whole. It is high-risk, always: the person sees every file (escaped and
// checked for hidden characters like every prompt, confirm/describe-call.ts) and what
// each would replace; the core writes only after their yes, and only if the folder is
// still what they saw. Until then the skill (the document) does not exist.
import type { CallState } from '../confirm/call-state.js';
import type { IntrinsicDefinition, IntrinsicDeps } from '../intrinsics/intrinsic-types.js';
import type { JsonObject } from '../protocol/envelope.js';
import { ToolFailure } from '../protocol/errors.js';
import { PROPOSE_WRITE_NAME, proposalProblem, proposedChange, proposeWriteSchema } from './proposed-change.js';

export const PROPOSE_WRITE: IntrinsicDefinition = {
  name: PROPOSE_WRITE_NAME,
  description: "Propose to add or change one of the person's skills (skills/<name>/: SKILL.md, skill.json, scripts) or files in their documents folder (documents/<path>, text or a file of your workspace): the person sees every file and the core writes them only after their yes",
  schema: proposeWriteSchema,
  acts: true,
  risk: 'high',
  check: proposalProblem,
  describe(args: JsonObject, deps: IntrinsicDeps): CallState {
    const change = proposedChange(args);
    if (change instanceof ToolFailure) return { unavailable: change.error.message };
    return deps.places.state(change);
  },
  run(args, session, deps) {
    const change = proposedChange(args);
    if (change instanceof ToolFailure) return change;
    const applied = deps.places.apply(change, (id) => deps.keptFile?.(id) ?? null);
    if (applied instanceof ToolFailure) return applied;
    const files = applied.written.map((w) => `${w.path} (${w.bytes} bytes)`).join(', ');
    const what = change.place === 'skills' ? `skill "${change.skill}" ${applied.created ? 'created' : 'changed'}` : 'documents written';
    deps.audit.record({ group: session.group, session: session.id, source: 'core', topic: `tool.invoke.${PROPOSE_WRITE_NAME}`, correlation: null, stage: 'handler', outcome: 'ok', reason: `${what} after a person's yes: ${files}`, detail: JSON.stringify(applied) });
    const written = applied.written.map(({ path, bytes }) => ({ path: `${applied.folder}/${path}`, bytes }));
    if (change.place === 'documents') return { documents: true, written };
    deps.skillsChanged?.();
    return { skill: change.skill, created: applied.created, written: applied.written.map(({ path, bytes }) => ({ path, bytes })) };
  },
};

/** What the agent's carapace-core skill says about propose_write, after its generated section. */
export const PROPOSE_WRITE_GUIDE = [
  '### Proposing a skill or a document',
  '',
  "You cannot write outside your workspace. To add or change one of the person's skills, or to save a text file in",
  "their documents folder (theirs, not yours: you cannot read it), propose the whole change with propose_write: every",
  'file with its full content, under `skills/<name>/` (a lower-case name) or `documents/`. The person sees each file',
  'and what it replaces and decides; nothing is written before their yes, and a file changed meanwhile is not written',
  'over (STATE_CHANGED: look again, propose again). Paths are letters, digits, `.`, `_`, `-`; no hidden files; one',
  'skill, or documents, per proposal; at most 20 files, 64 KB each, 256 KB in all. Characters a person cannot see',
  'are refused or shown to them escaped: write plain text.',
  'To save a file of your workspace there as it is (a chart a run made, a PDF), name it instead of content:',
  '`{"path":"documents/charts/spending.png","from":"out/chart.png"}` (documents only; PNG, JPEG, GIF, WebP, PDF or',
  'UTF-8 text, at most 10 MB each, 32 MB in all). The core takes its bytes before the person is asked: changing the',
  'file afterwards changes nothing.',
  '',
  '```',
  `ipc tool.invoke.propose_write '{"why":"to check the weather","files":[{"path":"skills/weather/SKILL.md","content":"# Weather\\n..."}]}'`,
  `ipc tool.invoke.propose_write '{"why":"the list you asked for","files":[{"path":"documents/shopping.md","content":"- milk\\n"}]}'`,
  `ipc tool.invoke.propose_write '{"why":"the chart you asked for","files":[{"path":"documents/spending.png","from":"out/chart.png"}]}'`,
  '```',
].join('\n');
