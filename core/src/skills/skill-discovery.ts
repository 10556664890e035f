// The skills on this installation: the bundled ones (skills/<name>/ in the repository)
// and the person's own (volumes/data/skills/<name>/, written by propose_write after a yes), each a folder with skill.json, SKILL.md
// (what the agent reads), its scripts and maybe a Dockerfile. Read once at start, on the
// core's side, without following a link (a SKILL.md linked to the core's own files would
// be handed to the agent): a folder that holds a link, too many files or bytes, a broken
// skill.json, a settings section its config_schema refuses, or a name another skill has,
// is listed with its problem and never offered.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { AllowList } from '../network/allow-list.js';
import { createAjv, describeFailure } from '../plugins/schema-compiler.js';
import type { JsonObject } from '../protocol/envelope.js';
import { checkSkillManifest, claimedElsewhere, SKILL_NAME, type SkillManifest } from './skill-manifest.js';

/** Files and bytes a skill folder may hold (it is hashed, and sent to the engine to build). */
export const MAX_SKILL_FILES = 500;
export const MAX_SKILL_BYTES = 32 * 1024 * 1024;
/** SKILL.md as the agent is handed it. */
export const MAX_INSTRUCTIONS_BYTES = 32 * 1024;
const MAX_MANIFEST_BYTES = 64 * 1024;
/** What a script's extension says runs it. */
export const SCRIPT_INTERPRETERS: Record<string, 'python3' | 'node' | 'sh'> = { '.py': 'python3', '.js': 'node', '.mjs': 'node', '.cjs': 'node', '.sh': 'sh' };

export type SkillOrigin = 'bundled' | 'own';

export interface Skill {
  manifest: SkillManifest;
  /** The folder, as the core sees it. */
  dir: string;
  origin: SkillOrigin;
  /** SKILL.md. */
  instructions: string;
  /** Files it may run, relative to its folder. */
  scripts: string[];
  /** It brings its own Dockerfile (skill-images.ts builds it). */
  dockerfile: boolean;
  /** SHA-256 over every file's path, mode and bytes: its image's tag. */
  contentHash: string;
  /** Its section of carapace.json (`skills.<name>`), checked against its config_schema. */
  settings: JsonObject;
  /** The hosts its relay lets it reach: skill.json's, and those its settings name (config_hosts). */
  allow: AllowList;
}

export interface SkillProblem {
  name: string;
  origin: SkillOrigin;
  problem: string;
}

export interface SkillFolders {
  bundled: string | null;
  own: string | null;
}

interface Walked {
  files: { rel: string; mode: number; bytes: Buffer }[];
}

/** Every regular file under `dir` (sorted), or why the folder cannot be a skill. */
export function walk(dir: string): Walked | { problem: string } {
  const files: Walked['files'] = [];
  let total = 0;
  const visit = (rel: string): string | null => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const stat = lstatSync(join(dir, path));
      if (stat.isSymbolicLink()) return `${path} is a link: a skill's files are its own (links are not followed)`;
      if (stat.isDirectory()) {
        const problem = visit(path);
        if (problem) return problem;
        continue;
      }
      if (!stat.isFile()) return `${path} is not a regular file`;
      if (files.length >= MAX_SKILL_FILES) return `more than ${MAX_SKILL_FILES} files`;
      total += stat.size;
      if (total > MAX_SKILL_BYTES) return `more than ${MAX_SKILL_BYTES / 1024 / 1024} MB`;
      files.push({ rel: path, mode: stat.mode & 0o777, bytes: readFileSync(join(dir, path)) });
    }
    return null;
  };
  const problem = visit('');
  return problem ? { problem } : { files };
}

export function hashOf(files: Walked['files']): string {
  const hash = createHash('sha256');
  for (const f of files) hash.update(`${f.rel}\0${f.mode.toString(8)}\0${f.bytes.length}\0`).update(f.bytes);
  return hash.digest('hex');
}

/** The skill's settings with their defaults (a copy: carapace.json's object stays as it is), or what is wrong with them. */
function checkSettings(manifest: SkillManifest, section: JsonObject | undefined): { settings: JsonObject } | { problem: string } {
  const settings = structuredClone(section ?? {});
  if (!manifest.config_schema) return Object.keys(settings).length > 0 ? { problem: `carapace.json skills.${manifest.name} is set, but the skill declares no config_schema` } : { settings };
  const validate = createAjv().compile(manifest.config_schema);
  if (validate(settings)) return { settings };
  const f = describeFailure(validate.errors);
  return { problem: `carapace.json skills.${manifest.name}${f.field ? `.${f.field}` : ''}: ${f.message}` };
}

/** One folder as a skill, or its problem. */
function readSkill(dir: string, name: string, origin: SkillOrigin, sections: Record<string, JsonObject>): Skill | SkillProblem {
  const fail = (problem: string): SkillProblem => ({ name, origin, problem });
  if (!SKILL_NAME.test(name)) return fail(`the folder's name is not a skill name (${SKILL_NAME.source})`);
  const walked = walk(dir);
  if ('problem' in walked) return fail(walked.problem);
  const manifestFile = walked.files.find((f) => f.rel === 'skill.json');
  const guide = walked.files.find((f) => f.rel === 'SKILL.md');
  if (!manifestFile) return fail('no skill.json');
  if (!guide) return fail('no SKILL.md (what the agent reads)');
  if (manifestFile.bytes.length > MAX_MANIFEST_BYTES) return fail('skill.json is larger than 64 KB');
  if (guide.bytes.length > MAX_INSTRUCTIONS_BYTES) return fail(`SKILL.md is larger than ${MAX_INSTRUCTIONS_BYTES / 1024} KB`);
  let raw: unknown;
  try {
    raw = JSON.parse(manifestFile.bytes.toString('utf8'));
  } catch (err) {
    return fail(`skill.json is not JSON (${(err as Error).message})`);
  }
  const manifest = checkSkillManifest(raw, name);
  if ('problem' in manifest) return fail(manifest.problem);
  const checked = checkSettings(manifest, Object.hasOwn(sections, name) ? sections[name] : undefined);
  if ('problem' in checked) return fail(checked.problem);
  const { settings } = checked;
  return {
    manifest,
    dir,
    origin,
    instructions: guide.bytes.toString('utf8'),
    scripts: walked.files.map((f) => f.rel).filter((rel) => Object.hasOwn(SCRIPT_INTERPRETERS, posix.extname(rel).toLowerCase())),
    dockerfile: walked.files.some((f) => f.rel === 'Dockerfile'),
    contentHash: hashOf(walked.files),
    settings,
    allow: AllowList.from({ hosts: manifest.network.hosts, config_hosts: manifest.network.config_hosts }, settings),
  };
}

/** Every skill in the bundled folder, then the person's own; a name taken twice is the person's problem. */
export function discoverSkills(folders: SkillFolders, sections: Record<string, JsonObject>): { skills: Skill[]; rejected: SkillProblem[] } {
  const found: Skill[] = [];
  const rejected: SkillProblem[] = [];
  for (const [origin, root] of [['bundled', folders.bundled], ['own', folders.own]] as const) {
    if (!root || !existsSync(root)) continue;
    for (const name of readdirSync(root).sort()) {
      const dir = join(root, name);
      if (name.startsWith('.') || !lstatSync(dir).isDirectory()) continue;
      if (found.some((s) => s.manifest.name === name)) {
        rejected.push({ name, origin, problem: 'a bundled skill has this name: give yours another' });
        continue;
      }
      let skill: Skill | SkillProblem;
      try {
        skill = readSkill(dir, name, origin, sections);
      } catch (err) {
        skill = { name, origin, problem: `could not be read (${(err as Error).message})` };
      }
      if ('problem' in skill) rejected.push(skill);
      else found.push(skill);
    }
  }
  const names = found.map((s) => s.manifest.name);
  const skills: Skill[] = [];
  for (const skill of found) {
    const problem = claimedElsewhere(skill.manifest, names);
    if (problem) rejected.push({ name: skill.manifest.name, origin: skill.origin, problem });
    else skills.push(skill);
  }
  return { skills, rejected };
}
