// A skill's secrets: the variables its skill.json names (each SKILL_<NAME>_..., checked by
// skill-manifest.ts), read from the core's own environment. They go into that skill's
// runs only (the exec's environment: not the sandbox's configuration, not its main
// process, never an agent's container), and every value joins the values the core's
// sanitizer scrubs from answers and audit entries.
import type { SkillManifest } from './skill-manifest.js';

/** `NAME=value` for each secret of the skill that the environment holds. */
export function skillSecretEnv(manifest: Pick<SkillManifest, 'secrets'>, env: NodeJS.ProcessEnv): string[] {
  return manifest.secrets.filter((name) => (env[name] ?? '').length > 0).map((name) => `${name}=${env[name]}`);
}

/** Every value of every skill's secrets, for the sanitizer. */
export function skillSecretValues(manifests: readonly Pick<SkillManifest, 'secrets'>[], env: NodeJS.ProcessEnv): string[] {
  return manifests.flatMap((m) => m.secrets.map((name) => env[name] ?? '')).filter((value) => value.length > 0);
}
