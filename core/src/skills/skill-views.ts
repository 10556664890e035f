// The skills as the console's Skills page shows them: where each comes from, what it may
// reach, which secrets it receives (named, and whether `.env` sets them: never their
// values), its image, and why one is not offered.
import type { Skill, SkillProblem } from './skill-discovery.js';

export interface SkillView {
  name: string;
  origin: 'bundled' | 'own';
  description: string;
  /** Hosts its relay lets it reach (skill.json's and those its settings name). */
  hosts: string[];
  /** It may reach any host at a public address. */
  public: boolean;
  secrets: { name: string; set: boolean }[];
  /** It brings its own Dockerfile (else the default sandbox image). */
  dockerfile: boolean;
  /** Why it is not offered, if it is not. */
  problem: string | null;
}

export function skillViews(found: { skills: readonly Skill[]; rejected: readonly SkillProblem[] }, env: NodeJS.ProcessEnv): SkillView[] {
  const offered = found.skills.map((s): SkillView => ({
    name: s.manifest.name,
    origin: s.origin,
    description: s.manifest.description,
    hosts: [...s.allow.hosts],
    public: s.manifest.network.public,
    secrets: s.manifest.secrets.map((name) => ({ name, set: (env[name] ?? '') !== '' })),
    dockerfile: s.dockerfile,
    problem: null,
  }));
  const refused = found.rejected.map((r): SkillView => ({ name: r.name, origin: r.origin, description: '', hosts: [], public: false, secrets: [], dockerfile: false, problem: r.problem }));
  return [...offered, ...refused].sort((a, b) => a.name.localeCompare(b.name));
}
