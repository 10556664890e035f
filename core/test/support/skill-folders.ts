// Skill folders for tests: a temporary bundled folder and a person's own, each skill
// written from a small description. No Jest here (the docker tests and unit tests share it).
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface SkillFiles {
  /** skill.json as an object (or text, written as it is). */
  manifest: unknown;
  /** More files by relative path (SKILL.md is written unless given). */
  files?: Record<string, string>;
}

export function writeSkill(root: string, name: string, skill: SkillFiles): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'skill.json'), typeof skill.manifest === 'string' ? skill.manifest : JSON.stringify(skill.manifest));
  const files = { 'SKILL.md': `# ${name}\nHow to use ${name}.\n`, ...skill.files };
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

export function skillRoots(): { bundled: string; own: string } {
  const base = mkdtempSync(join(tmpdir(), 'carapace-skills-'));
  const roots = { bundled: join(base, 'bundled'), own: join(base, 'own') };
  mkdirSync(roots.bundled);
  mkdirSync(roots.own);
  return roots;
}
