// The skills of one core, put together from what main.ts (and the docker tests) have: the
// skill folders, carapace.json's `skills` sections, the sandbox runs (sandbox-runs/wiring.ts)
// and the Docker runtime. Each skill that could not be loaded is audited once here.
import type { Logger } from 'pino';
import type { DockerRuntime } from '../agents/docker-runtime.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { SandboxSettings } from '../config.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { SandboxRuns } from '../sandbox-runs/wiring.js';
import { systemResolver, type Resolver } from '../network/public-address.js';
import { discoverSkills, type Skill, type SkillFolders } from './skill-discovery.js';
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
  /** Where the skills' relays make their sockets (under the core's run folder). */
  relayDir: string;
  /** How a relay resolves names: the system's; the docker tests' stand-in names only in code. */
  resolve?: Resolver;
}

export interface WiredSkills {
  runner: SkillRuns;
  /** Their secrets' values, for the core's sanitizer. */
  secrets: string[];
  /** Finds the skills again (after a person approved one): the secrets' values now. */
  refresh(): string[];
}

export function skillRuns(options: SkillWiringOptions): WiredSkills {
  const env = options.env ?? process.env;
  const { programs, runtime, settings, audit, log } = options;
  const discover = (): ReturnType<typeof discoverSkills> => {
    const found = discoverSkills(options.folders, options.sections);
    for (const bad of found.rejected) {
      log.warn({ skill: bad.name, origin: bad.origin, problem: bad.problem }, 'a skill could not be loaded');
      audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', code: 'SKILL_INVALID', reason: `skill ${bad.name} (${bad.origin}) not loaded: ${bad.problem}` });
    }
    return found;
  };
  const { skills, rejected } = discover();
  const images = new SkillImages(runtime.docker, settings.image, log);
  const runner = new SkillRuns({
    skills,
    rejected,
    programs: programs.runs,
    image: (skill) => images.imageFor(skill),
    plan: (skill, image, session) =>
      skillPlan(skill, image, {
        hostPath: (local) => runtime.hostPath(local),
        relayDir: options.relayDir,
        resolve: options.resolve ?? systemResolver,
        log,
        refused: (target, code, words) => audit.record({ group: session.group, session: session.id, source: 'core', topic: 'tool.invoke.run_skill', correlation: null, stage: 'handler', outcome: 'rejected', code: code ?? 'SKILL_NETWORK_REFUSED', reason: `skill ${skill.manifest.name}: ${target === null ? words : `connection to ${target} refused: ${words}`}` }),
      }),
    env: (skill) => [...skillEnv(skill), ...skillSecretEnv(skill.manifest, env)],
    maxTimeoutS: settings.timeout_s,
  });
  const secretsOf = (found: readonly Skill[]): string[] => skillSecretValues(found.map((s) => s.manifest), env);
  return {
    runner,
    secrets: secretsOf(skills),
    refresh: () => {
      const found = discover();
      runner.replace(found);
      return secretsOf(found.skills);
    },
  };
}
