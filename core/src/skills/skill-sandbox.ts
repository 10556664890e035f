// How a skill's sandbox differs from run_program's (sandbox-runs/container-spec.ts): its
// image, its folder mounted read-only at /skill, a label naming it, and the environment of
// each of its runs (never the sandbox's own): its settings from carapace.json as JSON.
import type { SandboxPlan } from '../sandbox-runs/warm-sandboxes.js';
import { SKILL_DIR } from './run-skill-tool.js';
import type { Skill } from './skill-discovery.js';

export const SKILL_LABEL = 'carapace.skill';

export interface SkillSandboxDeps {
  /** A folder of the core's as the Docker host has it (agents/docker-runtime.ts hostPath). */
  hostPath(local: string): Promise<string>;
}

export function skillPlan(skill: Skill, image: string, deps: SkillSandboxDeps): SandboxPlan {
  const name = skill.manifest.name;
  return {
    key: `skill:${name}`,
    label: `skill-${name}`,
    image,
    prepare: async () => ({
      extra: { binds: [`${await deps.hostPath(skill.dir)}:${SKILL_DIR}:ro`], labels: { [SKILL_LABEL]: name } },
      close: () => undefined,
    }),
  };
}

/** The environment of one run of the skill. */
export function skillEnv(skill: Skill): string[] {
  return [`CARAPACE_SKILL_SETTINGS=${JSON.stringify(skill.settings)}`];
}
