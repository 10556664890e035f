// Skills without an engine: skill.json's checks, discovery (a bad skill listed with its
// problem, never half-loaded), run_skill's arguments, list_skills' answer, and a skill
// sandbox's container options. The real skill sandboxes: docker/skills and docker/skill-attacks.
import { describe, expect, it } from '@jest/globals';
import { existsSync, statSync, symlinkSync } from 'node:fs';
import pino from 'pino';
import { join } from 'node:path';
import { ToolFailure } from '../../src/protocol/errors.js';
import { sandboxCreateOptions } from '../../src/sandbox-runs/container-spec.js';
import { skillCommand } from '../../src/skills/run-skill-tool.js';
import { discoverSkills, type Skill } from '../../src/skills/skill-discovery.js';
import { skillImageTag } from '../../src/skills/skill-images.js';
import { checkSkillManifest, secretPrefix } from '../../src/skills/skill-manifest.js';
import { SkillRuns } from '../../src/skills/skill-runs.js';
import { skillEnv, skillPlan } from '../../src/skills/skill-sandbox.js';
import { ROOT } from '../harness.js';
import { skillRoots, writeSkill } from '../support/skill-folders.js';

const ok = { name: 'fetch', description: 'Fetch a page' };

describe('skill.json', () => {
  it('defaults: no network, no secrets', () => {
    expect(checkSkillManifest(ok, 'fetch')).toEqual({ ...ok, network: { hosts: [], public: false, config_hosts: [] }, secrets: [] });
  });

  it.each([
    [{ ...ok, extra: 1 }, 'fetch', /additionalProperties "extra"/],
    [{ description: 'x' }, 'fetch', /name/],
    [{ ...ok, name: 'Fetch' }, 'Fetch', /name/],
    [ok, 'other', /not its folder's name/],
    [{ ...ok, network: { hosts: ['*.com'] } }, 'fetch', /network.hosts: "\*.com"/],
    [{ ...ok, network: { hosts: ['a..b'] } }, 'fetch', /network.hosts/],
    [{ ...ok, network: { hosts: ['x.org:99999'] } }, 'fetch', /port 99999/],
    [{ ...ok, network: { public: 'yes' } }, 'fetch', /public/],
    [{ ...ok, network: { config_hosts: ['/url'] } }, 'fetch', /config_hosts: "\/url"/],
    [{ ...ok, secrets: ['ANTHROPIC_API_KEY'] }, 'fetch', /secrets/],
    [{ ...ok, secrets: ['TELEGRAM_BOT_TOKEN'] }, 'fetch', /secrets/],
    [{ ...ok, secrets: ['SKILL_WEB_SEARCH_API_KEY'] }, 'fetch', /not this skill's: a skill's secrets are named SKILL_FETCH_/],
    [{ ...ok, secrets: ['SKILL_FETCH_'] }, 'fetch', /not this skill's/],
  ])('refuses %j in folder %s', (raw, folder, problem) => {
    const r = checkSkillManifest(raw, folder);
    expect(r).toHaveProperty('problem');
    expect((r as { problem: string }).problem).toMatch(problem);
  });

  it('names secrets after the skill', () => {
    expect(secretPrefix('web-search')).toBe('SKILL_WEB_SEARCH_');
    expect(checkSkillManifest({ name: 'web-search', description: 'x', secrets: ['SKILL_WEB_SEARCH_API_KEY'] }, 'web-search')).toMatchObject({ secrets: ['SKILL_WEB_SEARCH_API_KEY'] });
  });
});

describe('discovery', () => {
  it('finds the bundled skills and the person\'s own, each whole, and lists every bad one with its problem', () => {
    const roots = skillRoots();
    writeSkill(roots.bundled, 'fetch', { manifest: { ...ok, network: { public: true } }, files: { 'fetch.py': 'print(1)\n', 'lib/util.sh': 'true\n', 'notes.txt': 'x' } });
    writeSkill(roots.bundled, 'web-search', { manifest: { name: 'web-search', description: 'Search', secrets: ['SKILL_WEB_SEARCH_API_KEY'] } });
    writeSkill(roots.own, 'fetch', { manifest: ok });
    writeSkill(roots.own, 'broken', { manifest: '{ not json' });
    writeSkill(roots.own, 'greedy', { manifest: { name: 'greedy', description: 'x', secrets: ['ANTHROPIC_API_KEY'] } });
    writeSkill(roots.own, 'web', { manifest: { name: 'web', description: 'x', secrets: ['SKILL_WEB_SEARCH_API_KEY'] } });
    writeSkill(roots.own, 'linked', { manifest: { name: 'linked', description: 'x' } });
    symlinkSync('/etc/passwd', join(roots.own, 'linked', 'SKILL.md.bak'));
    const nodoc = writeSkill(roots.own, 'nodoc', { manifest: { name: 'nodoc', description: 'x' } });
    symlinkSync('/dev/null', join(nodoc, 'x')); // links are refused before SKILL.md is looked for
    writeSkill(roots.own, 'BadName', { manifest: { name: 'x', description: 'x' } });
    writeSkill(roots.own, 'configured', { manifest: { name: 'configured', description: 'x', config_schema: { type: 'object', additionalProperties: false, properties: { url: { type: 'string' } } }, network: { config_hosts: ['/url'] } } });
    writeSkill(roots.own, 'unsettled', { manifest: { name: 'unsettled', description: 'x' } });
    const { skills, rejected } = discoverSkills(roots, { configured: { url: 'https://search.example.net:8443/x' }, unsettled: { a: 1 } });
    expect(skills.map((s) => [s.manifest.name, s.origin])).toEqual([['fetch', 'bundled'], ['web-search', 'bundled'], ['configured', 'own']]);
    const fetch = skills[0];
    expect(fetch.scripts).toEqual(['fetch.py', 'lib/util.sh']);
    expect(fetch.instructions).toContain('How to use fetch');
    expect(fetch.dockerfile).toBe(false);
    expect(fetch.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(skills[2].allow.hosts).toEqual(['search.example.net:8443']);
    expect(skills[2].allow.allows('search.example.net:8443')).toBe(true);
    const problems = Object.fromEntries(rejected.map((r) => [r.name, r.problem]));
    expect(problems).toEqual({
      fetch: expect.stringMatching(/a bundled skill has this name/),
      broken: expect.stringMatching(/skill.json is not JSON/),
      greedy: expect.stringMatching(/"ANTHROPIC_API_KEY" is not this skill's/),
      web: expect.stringMatching(/"SKILL_WEB_SEARCH_API_KEY" belongs to the skill "web-search"/),
      linked: expect.stringMatching(/SKILL.md.bak is a link/),
      nodoc: expect.stringMatching(/x is a link/),
      BadName: expect.stringMatching(/not a skill name/),
      unsettled: expect.stringMatching(/skills.unsettled is set, but the skill declares no config_schema/),
    });
  });

  it('a settings section its config_schema refuses keeps the skill out', () => {
    const roots = skillRoots();
    writeSkill(roots.own, 'configured', { manifest: { name: 'configured', description: 'x', config_schema: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] } } });
    expect(discoverSkills(roots, {}).rejected).toEqual([{ name: 'configured', origin: 'own', problem: expect.stringMatching(/skills.configured.url: missing required property/) }]);
  });

  it('an image tag follows the folder\'s content', () => {
    const roots = skillRoots();
    writeSkill(roots.own, 'built', { manifest: { name: 'built', description: 'x' }, files: { Dockerfile: 'FROM carapace-sandbox:latest\n' } });
    const first = discoverSkills(roots, {}).skills[0];
    writeSkill(roots.own, 'built', { manifest: { name: 'built', description: 'x' }, files: { Dockerfile: 'FROM carapace-sandbox:latest\nRUN true\n' } });
    const second = discoverSkills(roots, {}).skills[0];
    expect(first.dockerfile).toBe(true);
    expect(skillImageTag(first)).toMatch(/^carapace-skill-built:[0-9a-f]{16}$/);
    expect(skillImageTag(second)).not.toBe(skillImageTag(first));
  });
});

function fetchSkill(): Skill {
  const roots = skillRoots();
  writeSkill(roots.bundled, 'fetch', { manifest: ok, files: { 'fetch.py': 'print(1)\n', 'sub/x.sh': 'true\n' } });
  return discoverSkills(roots, {}).skills[0];
}

describe('run_skill arguments', () => {
  const skill = fetchSkill();

  it('a script the skill has, from /skill; files of the workspace after the arguments', () => {
    expect(skillCommand({ skill: 'fetch', script: 'fetch.py', args: ['https://x.org/'], files: ['data/a.html', '/workspace/group/b.txt'] }, skill, 300)).toEqual({ interpreter: 'python3', program: 'fetch.py', dir: '/skill', args: ['https://x.org/', '/workspace/data/a.html', '/workspace/b.txt'], timeoutS: 60 });
    expect(skillCommand({ skill: 'fetch', script: './sub/../sub/x.sh' }, skill, 300)).toMatchObject({ interpreter: 'sh', program: 'sub/x.sh' });
  });

  it.each([
    [{ script: '../../etc/passwd' }, 'script'],
    [{ script: '/skill/fetch.py' }, 'script'],
    [{ script: 'skill.json' }, 'script'],
    [{ script: 'SKILL.md' }, 'script'],
    [{ script: 'fetch.py', files: ['../other/x'] }, 'files'],
    [{ script: 'fetch.py', files: ['/etc/passwd'] }, 'files'],
    [{ script: 'fetch.py', timeout_s: 301 }, 'timeout_s'],
  ])('refuses %j (field %s)', (args, field) => {
    const r = skillCommand({ skill: 'fetch', ...args }, skill, 300);
    expect(r).toBeInstanceOf(ToolFailure);
    expect((r as ToolFailure).error).toMatchObject({ code: 'VALIDATION_FAILED', field });
  });
});

describe('list_skills and run_skill before a run', () => {
  const skill = fetchSkill();
  const runs = new SkillRuns({
    skills: [skill],
    rejected: [{ name: 'broken', origin: 'own', problem: 'skill.json is not JSON' }],
    programs: { runIn: () => Promise.reject(new Error('not here')) } as never,
    image: async () => 'img',
    plan: () => ({ key: 'skill:fetch', label: 'skill-fetch', image: 'img' }),
    env: () => [],
    maxTimeoutS: 300,
  });
  const session = { id: 's', group: 'g', container: 'c' } as never;
  const call = { correlation: 'c', keepWaiting: () => undefined };

  it('lists each skill with its instructions, and the ones that could not be loaded', () => {
    expect(runs.list()).toEqual({
      skills: [{ name: 'fetch', description: 'Fetch a page', scripts: ['fetch.py', 'sub/x.sh'], network: { hosts: [], public: false }, instructions: expect.stringContaining('How to use fetch') }],
      unavailable: [{ name: 'broken', origin: 'own', problem: 'skill.json is not JSON' }],
    });
  });

  it('a skill it does not have, or one that could not be loaded, is a validation error naming why', async () => {
    expect(((await runs.run({ skill: 'nope', script: 'x.py' }, session, call)) as ToolFailure).error).toMatchObject({ code: 'VALIDATION_FAILED', field: 'skill', message: expect.stringMatching(/no skill "nope"/) });
    expect(((await runs.run({ skill: 'broken', script: 'x.py' }, session, call)) as ToolFailure).error).toMatchObject({ field: 'skill', message: expect.stringMatching(/could not be loaded: skill.json is not JSON/) });
  });
});

describe("a skill sandbox's container options", () => {
  it('adds its folder read-only, its label and its main process; nothing else changes', () => {
    const base = { name: 'n', image: 'img', instance: 'i', group: 'g', session: 's', runtime: 'runsc' as const, workspace: { source: 'vol', volume: true }, limits: { memory_mb: 512, cpus: 1, pids: 128 } };
    const plain = sandboxCreateOptions(base);
    const skill = sandboxCreateOptions({ ...base, extra: { binds: ['/host/skills/fetch:/skill:ro'], labels: { 'carapace.skill': 'fetch' }, command: ['node', '-e', 'x'] } });
    expect(skill.HostConfig!.Binds).toEqual(['vol:/workspace:ro,nocopy', '/host/skills/fetch:/skill:ro']);
    expect([skill.Entrypoint, skill.Cmd]).toEqual([['node'], ['-e', 'x']]);
    expect([plain.Entrypoint, plain.Cmd]).toEqual([['sleep'], ['infinity']]);
    expect(skill.Labels).toMatchObject({ 'carapace.skill': 'fetch', 'carapace.role': 'sandbox' });
    expect(skill.Env).toEqual([]);
    expect({ ...skill.HostConfig, Binds: null, Mounts: null }).toEqual({ ...plain.HostConfig, Binds: null, Mounts: null });
    expect(skill.HostConfig!.NetworkMode).toBe('none');
  });
});

describe("a skill's network in its sandbox", () => {
  const deps = (relayDir: string) => ({ hostPath: async (p: string) => `/host${p}`, relayDir, resolve: async () => [], log: pino({ level: 'silent' }), refused: () => undefined });

  it('a skill without hosts gets no socket, no forwarder and no proxy', async () => {
    const skill = fetchSkill();
    const plan = skillPlan(skill, 'img', deps(join(skillRoots().own, 'relays')));
    const made = await plan.prepare!();
    expect(made.extra.binds).toEqual([`/host${skill.dir}:/skill:ro`]);
    expect(made.extra.command).toBeUndefined();
    expect(skillEnv(skill)).toEqual(['CARAPACE_SKILL_SETTINGS={}']);
  });

  it('a skill with hosts gets its relay socket, read-only at /run/carapace-skill, the forwarder as main process, and the proxy in each run', async () => {
    const roots = skillRoots();
    writeSkill(roots.own, 'net', { manifest: { name: 'net', description: 'x', network: { public: true } }, files: { 'a.py': '' } });
    const skill = discoverSkills(roots, {}).skills[0];
    const relayDir = join(roots.own, 'relays');
    const made = await skillPlan(skill, 'img', deps(relayDir)).prepare!();
    try {
      const [, relay] = made.extra.binds;
      expect(relay).toMatch(new RegExp(`^/host${relayDir}/[0-9a-f]{24}:/run/carapace-skill:ro$`));
      const socket = join(relay.slice('/host'.length).split(':')[0], 'relay.sock');
      expect(statSync(socket).isSocket()).toBe(true);
      expect(statSync(relayDir).mode & 0o777).toBe(0o700);
      expect(made.extra.command?.slice(0, 2)).toEqual(['node', '-e']);
      expect(skillEnv(skill)).toEqual(expect.arrayContaining(['HTTPS_PROXY=http://127.0.0.1:3128', 'http_proxy=http://127.0.0.1:3128']));
      made.close();
      expect(existsSync(socket)).toBe(false);
    } finally {
      made.close();
    }
  });
});

describe('the bundled skills', () => {
  const bundled = { bundled: join(ROOT, 'skills'), own: null };

  it('load whole: fetch (the public internet), web-search (its configured SearXNG only, its key)', () => {
    const { skills, rejected } = discoverSkills(bundled, { 'web-search': { searxng_url: 'http://searxng.lan:8080' } });
    expect(rejected).toEqual([]);
    const byName = Object.fromEntries(skills.map((s) => [s.manifest.name, s]));
    expect(byName.fetch.manifest.network).toEqual({ hosts: [], public: true, config_hosts: [] });
    expect(byName.fetch.scripts).toEqual(['fetch.py']);
    expect(byName['web-search'].allow.hosts).toEqual(['searxng.lan:8080']);
    expect(byName['web-search'].manifest.network.public).toBe(false);
    expect(byName['web-search'].manifest.secrets).toEqual(['SKILL_WEB_SEARCH_API_KEY']);
    expect(byName['web-search'].settings).toEqual({ searxng_url: 'http://searxng.lan:8080', max_results: 8 });
  });

  it('web-search unconfigured reaches nothing; a setting that is not a URL keeps it out', () => {
    const unset = discoverSkills(bundled, {}).skills.find((s) => s.manifest.name === 'web-search')!;
    expect([unset.allow.hosts, unset.settings]).toEqual([[], { max_results: 8 }]);
    expect(discoverSkills(bundled, { 'web-search': { searxng_url: 'searxng.lan' } }).rejected).toEqual([{ name: 'web-search', origin: 'bundled', problem: expect.stringMatching(/skills.web-search.searxng_url/) }]);
  });
});
