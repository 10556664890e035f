// run_skill and list_skills through the real pipeline and the real `ipc`, without an
// engine: the skills' runs are a stand-in that answers with what it was asked (the command,
// its environment), so that what the core does around a run is seen: offered only once
// accepted, authorized per group, the answer labelled external content (the session too),
// audited, a skill's secrets scrubbed. The real sandboxes: docker/skills.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Session } from '../../src/boundary/session-table.js';
import type { RunCommand } from '../../src/sandbox-runs/run-exec.js';
import pino from 'pino';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config.js';
import { skillRuns } from '../../src/skills/wiring.js';
import { Stack } from '../harness.js';
import { skillRoots, writeSkill } from '../support/skill-folders.js';

const FETCH_SECRET = 'fetch-secret-7d1e44b09a';
const SEARCH_SECRET = 'search-secret-3c9f0a21be';
let stack: Stack;
let family: Session;
let kids: Session;
const asked: { cmd: RunCommand; plan: string; tool: string; skill?: string }[] = [];

function answer(cmd: RunCommand): Record<string, unknown> {
  return { run_id: '20260101-000000-abcdef', exit_code: 0, timed_out: false, killed: null, duration_ms: 5, stdout: `ran ${cmd.program} ${cmd.args.join(' ')}\n${(cmd.env ?? []).join('\n')}`, stderr: '', stdout_cut_bytes: 0, stderr_cut_bytes: 0, stdout_bytes: 1, stderr_bytes: 0, outputs: [], refused_outputs: [], refused_count: 0 };
}

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {}, kids: { tools: ['echo'] } } } });
  family = await stack.core.openSession('family');
  kids = await stack.core.openSession('kids');
}, 30_000);

afterAll(async () => {
  await stack?.stop();
});

describe('skills through the pipeline', () => {
  it('are not offered before the core has sandboxes (a call says why)', async () => {
    const tools = (await stack.ipc(family, 'tool.invoke.list_tools', {})).out.tools.map((t: { name: string }) => t.name);
    expect(tools).not.toContain('run_skill');
    expect(tools).not.toContain('list_skills');
    const r = await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'fetch', script: 'fetch.py' });
    expect(r.code).toBe(1);
    expect(r.err).toMatchObject({ code: 'SANDBOX_UNAVAILABLE' });
  });

  it('once accepted: list_skills lists them, run_skill runs one and its answer is external content, the session labelled', async () => {
    const roots = skillRoots();
    writeSkill(roots.bundled, 'fetch', { manifest: { name: 'fetch', description: 'Fetch a page', network: { public: true }, secrets: ['SKILL_FETCH_TOKEN'] }, files: { 'fetch.py': 'print(1)\n' } });
    writeSkill(roots.own, 'broken', { manifest: '{' });
    writeSkill(roots.bundled, 'web-search', { manifest: { name: 'web-search', description: 'Search', secrets: ['SKILL_WEB_SEARCH_API_KEY'] }, files: { 'search.py': 'print(1)\n' } });
    const programs = {
      runIn: async (_session: Session, _call: unknown, cmd: RunCommand, plan: { key: string }, audited: { tool: string; skill?: string }) => {
        asked.push({ cmd, plan: plan.key, ...audited });
        const said = answer(cmd);
        // As if a run's audit entry held what it printed: the audit log scrubs it too.
        stack.core.audit.record({ group: 'family', session: null, source: 'core', topic: 'tool.invoke.run_skill', correlation: null, stage: 'handler', outcome: 'ok', reason: String(said.stdout) });
        return said;
      },
    };
    const skills = skillRuns({ programs: { runs: programs } as never, runtime: { docker: {}, hostPath: async (p: string) => p } as never, settings: parseConfig({}).sandbox, folders: roots, sections: {}, audit: stack.core.audit, log: pino({ level: 'silent' }), relayDir: join(stack.dir, 'relays'), env: { SKILL_FETCH_TOKEN: FETCH_SECRET, SKILL_WEB_SEARCH_API_KEY: SEARCH_SECRET, ANTHROPIC_API_KEY: 'sk-ant-not-for-skills' } });
    expect(skills.secrets.sort()).toEqual([FETCH_SECRET, SEARCH_SECRET].sort());
    stack.core.acceptRuns({ run: async () => ({}) }, async () => undefined, skills);
    const tools = (await stack.ipc(family, 'tool.invoke.list_tools', {})).out.tools.map((t: { name: string }) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['run_program', 'run_skill', 'list_skills']));
    const list = await stack.ipc(family, 'tool.invoke.list_skills', {});
    expect(list.out.skills).toEqual([expect.objectContaining({ name: 'fetch', scripts: ['fetch.py'], network: { hosts: [], public: true } }), expect.objectContaining({ name: 'web-search' })]);
    expect(list.out.unavailable).toEqual([{ name: 'broken', origin: 'own', problem: expect.stringMatching(/not JSON/) }]);
    expect(stack.core.sessions.get(family.id)?.untrustedInput).toBeFalsy();
    const r = await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'fetch', script: 'fetch.py', args: ['https://example.org/'] });
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({ skill: 'fetch', exit_code: 0, external_content: true, stdout: expect.stringContaining('ran fetch.py https://example.org/') });
    expect(asked.at(-1)).toMatchObject({ plan: 'skill:fetch', tool: 'run_skill', skill: 'fetch', cmd: { dir: '/skill', program: 'fetch.py', interpreter: 'python3' } });
    expect(stack.core.sessions.get(family.id)?.untrustedInput).toBe(true);
  });

  it("a skill's run gets its own secrets only, never the core's or another skill's; they are scrubbed from its answer and never audited", async () => {
    const r = await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'fetch', script: 'fetch.py' });
    const env = asked.at(-1)!.cmd.env!;
    expect(env).toContain(`SKILL_FETCH_TOKEN=${FETCH_SECRET}`);
    expect(env.join('\n')).not.toContain(SEARCH_SECRET);
    expect(env.join('\n')).not.toContain('sk-ant-not-for-skills');
    expect(env).toContain('CARAPACE_SKILL_SETTINGS={}');
    // The stand-in printed its environment: the value is scrubbed on its way to the agent.
    expect(r.stdout).not.toContain(FETCH_SECRET);
    expect(r.out.stdout).toContain('SKILL_FETCH_TOKEN=[REDACTED]');
    const search = await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'web-search', script: 'search.py' });
    expect(asked.at(-1)!.cmd.env).toContain(`SKILL_WEB_SEARCH_API_KEY=${SEARCH_SECRET}`);
    expect(asked.at(-1)!.cmd.env!.join('\n')).not.toContain(FETCH_SECRET);
    expect(search.stdout).not.toContain(SEARCH_SECRET);
    await stack.core.audit.flush();
    const audited = readFileSync(stack.auditFile, 'utf8');
    expect(audited).toContain('SKILL_FETCH_TOKEN=[REDACTED]');
    expect(audited).not.toContain(FETCH_SECRET);
    expect(audited).not.toContain(SEARCH_SECRET);
  });

  it('run_skill follows the group\'s tools list; list_skills reads and is always allowed', async () => {
    const r = await stack.ipc(kids, 'tool.invoke.run_skill', { skill: 'fetch', script: 'fetch.py' });
    expect(r.err).toMatchObject({ code: 'UNAUTHORIZED' });
    expect((await stack.ipc(kids, 'tool.invoke.list_skills', {})).code).toBe(0);
  });

  it('refuses a script the skill does not have and an unknown skill, before anything runs', async () => {
    const before = asked.length;
    for (const [args, field] of [[{ skill: 'fetch', script: '../../../etc/passwd' }, 'script'], [{ skill: 'fetch', script: 'skill.json' }, 'script'], [{ skill: 'nope', script: 'x.py' }, 'skill'], [{ skill: 'broken', script: 'x.py' }, 'skill'], [{ skill: 'fetch', script: 'fetch.py', files: ['../x'] }, 'files']] as const) {
      const r = await stack.ipc(family, 'tool.invoke.run_skill', args);
      expect(r.err).toMatchObject({ code: 'VALIDATION_FAILED', field });
    }
    expect(asked.length).toBe(before);
  });
});
