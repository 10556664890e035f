// The skills of one core, put together from what main.ts (and the docker tests) have: the
// skill folders, carapace.json's `skills` sections, the sandbox runs (sandbox-runs/wiring.ts)
// and the Docker runtime. Each skill that could not be loaded is audited once here.
import type { Logger } from 'pino';
import type { DockerRuntime } from '../agents/docker-runtime.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { SandboxSettings } from '../config.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { SandboxRuns } from '../sandbox-runs/wiring.js';
import { discoverSkills, type SkillFolders } from './skill-discovery.js';
import { SkillImages } from './skill-images.js';
import { SkillRuns } from './skill-runs.js';
import { skillEnv, skillPlan } from './skill-sandbox.js';
import { skillSecretEnv, skillSecretValues } from './skill-secrets.js';

export interface SkillWiringOptions {
  programs: SandboxRuns;
  runtime: DockerRuntime;
  settings: SandboxSettings;
  folders: SkillFolders;
  /** carapace.json's `skills`: each skill's settings. */
  sections: Record<string, JsonObject>;
  audit: AuditLog;
  log: Logger;
  /** Where the skills' secrets are read from: the core's environment. */
  env?: NodeJS.ProcessEnv;
}

/** The skills' runner, and their secrets' values for the core's sanitizer. */
export function skillRuns(options: SkillWiringOptions): { runner: SkillRuns; secrets: string[] } {
  const env = options.env ?? process.env;
  const { programs, runtime, settings, audit, log } = options;
  const { skills, rejected } = discoverSkills(options.folders, options.sections);
  for (const bad of rejected) {
    log.warn({ skill: bad.name, origin: bad.origin, problem: bad.problem }, 'a skill could not be loaded');
    audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', code: 'SKILL_INVALID', reason: `skill ${bad.name} (${bad.origin}) not loaded: ${bad.problem}` });
  }
  const images = new SkillImages(runtime.docker, settings.image, log);
  const runner = new SkillRuns({
    skills,
    rejected,
    programs: programs.runs,
    image: (skill) => images.imageFor(skill),
    plan: (skill, image) => skillPlan(skill, image, { hostPath: (local) => runtime.hostPath(local) }),
    env: (skill) => [...skillEnv(skill), ...skillSecretEnv(skill.manifest, env)],
    maxTimeoutS: settings.timeout_s,
  });
  return { runner, secrets: skillSecretValues(skills.map((s) => s.manifest), env) };
}
