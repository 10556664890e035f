// propose_write, the core's tool for writing where the agent cannot (DESIGN 17): a skill's
// files, proposed whole. It is high-risk, always: the person sees every file (escaped and
// checked for hidden characters like every prompt, confirm/describe-call.ts) and what
// each would replace; the core writes only after their yes, and only if the folder is
// still what they saw. Until then the skill does not exist.
import type { CallState } from '../confirm/call-state.js';
import type { IntrinsicDefinition, IntrinsicDeps } from '../intrinsics/intrinsic-types.js';
import type { JsonObject } from '../protocol/envelope.js';
import { ToolFailure } from '../protocol/errors.js';
import { PROPOSE_WRITE_NAME, proposedChange, proposeWriteSchema } from './proposed-change.js';

function unavailable(): ToolFailure {
  return new ToolFailure({ code: 'WRITES_UNAVAILABLE', message: 'this installation takes no proposed writes (it has no skills folder)', retriable: false, stage: 6 });
}

export const PROPOSE_WRITE: IntrinsicDefinition = {
  name: PROPOSE_WRITE_NAME,
  description: "Propose to add or change one of the person's skills (skills/<name>/: SKILL.md, skill.json, scripts): the person sees every file and the core writes them only after their yes",
  schema: proposeWriteSchema,
  acts: true,
  risk: 'high',
  check: (args) => {
    const change = proposedChange(args);
    return change instanceof ToolFailure ? change : null;
  },
  describe(args: JsonObject, deps: IntrinsicDeps): CallState {
    const change = proposedChange(args);
    if (change instanceof ToolFailure) return { unavailable: change.error.message };
    return deps.skillWrites ? deps.skillWrites.state(change) : { unavailable: 'no skills folder' };
  },
  run(args, session, deps) {
    const change = proposedChange(args);
    if (change instanceof ToolFailure) return change;
    if (!deps.skillWrites) return unavailable();
    const applied = deps.skillWrites.apply(change);
    if (applied instanceof ToolFailure) return applied;
    deps.skillsChanged?.();
    const files = applied.written.map((w) => `${w.path} (${w.bytes} bytes)`).join(', ');
    deps.audit.record({ group: session.group, session: session.id, source: 'core', topic: `tool.invoke.${PROPOSE_WRITE_NAME}`, correlation: null, stage: 'handler', outcome: 'ok', reason: `skill "${applied.skill}" ${applied.created ? 'created' : 'changed'} after a person's yes: ${files}`, detail: JSON.stringify(applied) });
    return { skill: applied.skill, created: applied.created, written: applied.written.map(({ path, bytes }) => ({ path, bytes })) };
  },
};

/** What the agent's carapace-core skill says about propose_write, after its generated section. */
export const PROPOSE_WRITE_GUIDE = [
  '### Proposing a skill',
  '',
  "You cannot write outside your workspace. To add or change one of the person's skills, propose the whole change",
  'with propose_write: every file with its full content, under `skills/<name>/` (a lower-case name). The person sees',
  'each file and what it replaces and decides; nothing is written before their yes, and a skill changed meanwhile is',
  'not written over (STATE_CHANGED: look again, propose again). Paths are letters, digits, `.`, `_`, `-`; no hidden',
  'files; one skill per proposal; at most 20 files, 64 KB each, 256 KB in all. Characters a person cannot see',
  'are refused or shown to them escaped: write plain text.',
  '',
  '```',
  `ipc tool.invoke.propose_write '{"why":"to check the weather","files":[{"path":"skills/weather/SKILL.md","content":"# Weather\\n..."}]}'`,
  '```',
].join('\n');
