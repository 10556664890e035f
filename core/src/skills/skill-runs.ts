// run_skill from call to answer, and list_skills: the skill named, its script checked
// (run-skill-tool.ts), its image (skill-images.ts), its sandbox plan (skill-sandbox.ts: its
// folder, its relay), then the run as run_program's (sandbox-runs/program-runs.ts: lease,
// exec, /out back into the workspace, audit). The answer carries `external_content`: what
// a skill prints came from outside.
import type { Session } from '../boundary/session-table.js';
import type { CallContext } from '../intrinsics/intrinsic-types.js';
import type { JsonObject } from '../protocol/envelope.js';
import { pipelineError, ToolFailure } from '../protocol/errors.js';
import type { ProgramRuns } from '../sandbox-runs/program-runs.js';
import type { SandboxPlan } from '../sandbox-runs/warm-sandboxes.js';
import { skillCommand } from './run-skill-tool.js';
import type { SkillRunner } from '../intrinsics/intrinsic-types.js';
import type { Skill, SkillProblem } from './skill-discovery.js';

export interface SkillRunsDeps {
  skills: readonly Skill[];
  rejected: readonly SkillProblem[];
  programs: ProgramRuns;
  /** The skill's image, built if need be, or why not. */
  image(skill: Skill): Promise<string | ToolFailure>;
  /** How the skill's sandbox for `session` is made (its folder, its relay). */
  plan(skill: Skill, image: string, session: Session): SandboxPlan;
  /** The environment of one run of the skill: its settings, proxy and secrets. */
  env(skill: Skill): string[];
  maxTimeoutS: number;
}

export class SkillRuns implements SkillRunner {
  private found: { skills: readonly Skill[]; rejected: readonly SkillProblem[] };

  constructor(private readonly deps: SkillRunsDeps) {
    this.found = { skills: deps.skills, rejected: deps.rejected };
  }

  get skills(): readonly Skill[] {
    return this.found.skills;
  }

  get rejected(): readonly SkillProblem[] {
    return this.found.rejected;
  }

  /** The skills found again (a skill a person approved exists from now on). */
  replace(found: { skills: readonly Skill[]; rejected: readonly SkillProblem[] }): void {
    this.found = found;
  }

  list(): JsonObject {
    return {
      skills: this.found.skills.map((s) => ({
        name: s.manifest.name,
        description: s.manifest.description,
        scripts: s.scripts,
        network: { hosts: s.allow.hosts, public: s.manifest.network.public },
        instructions: s.instructions,
      })),
      unavailable: this.found.rejected.map((r) => ({ name: r.name, origin: r.origin, problem: r.problem })),
    };
  }

  async run(args: JsonObject, session: Session, call: CallContext): Promise<unknown> {
    const skill = this.found.skills.find((s) => s.manifest.name === args.skill);
    if (!skill) {
      const bad = this.found.rejected.find((r) => r.name === args.skill);
      const message = bad ? `skill "${bad.name}" could not be loaded: ${bad.problem}` : `no skill "${String(args.skill)}": list_skills names them`;
      return new ToolFailure(pipelineError('VALIDATION_FAILED', message, false, { stage: 6, field: 'skill' }));
    }
    const cmd = skillCommand(args, skill, this.deps.maxTimeoutS);
    if (cmd instanceof ToolFailure) return cmd;
    const image = await this.deps.image(skill);
    if (image instanceof ToolFailure) return image;
    const answer = await this.deps.programs.runIn(session, call, { ...cmd, env: this.deps.env(skill) }, this.deps.plan(skill, image, session), { tool: 'run_skill', skill: skill.manifest.name });
    if (answer instanceof ToolFailure) return answer;
    return { skill: skill.manifest.name, ...answer, external_content: true };
  }
}
