// Issue 33 §3: writes a person approves. An agent (here: the real ipc binary on a session
// socket, as a hostile agent would call it) proposes a skill; the person sees every file
// and what it replaces, escaped; the core writes only after their yes and only while the
// folder is still what they saw. Until then the skill does not exist.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Session } from '../../src/boundary/session-table.js';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import type { RunCommand } from '../../src/sandbox-runs/run-exec.js';
import { skillRuns } from '../../src/skills/wiring.js';
import { Stack } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';

let stack: Stack;
let family: Session;
let skills: string;
let documents: string;

const SKILL_MD = '# Weather\n\nRun `scripts/today.py <city>` to get today\'s forecast.\n';
const SKILL_JSON = '{ "name": "weather", "description": "today\'s forecast", "network": { "hosts": ["api.open-meteo.com"] } }\n';
const SCRIPT = 'import sys\nprint("sunny in", sys.argv[1])\n';

beforeAll(async () => {
  stack = await Stack.start({ plugins: [], config: { confirmation_timeout_ms: 20_000 } });
  family = await stack.openSession('family');
  skills = join(stack.dataDir, 'skills');
  documents = join(stack.dataDir, 'documents');
});

afterAll(async () => {
  await stack?.stop();
});

type Proposal = { tool: string; arguments: Record<string, unknown> };
const proposes = (skill: string) => (p: Proposal) => p.tool === 'propose_write' && JSON.stringify(p.arguments).includes(`skills/${skill}/`);
const proposesDocument = (path: string) => (p: Proposal) => p.tool === 'propose_write' && JSON.stringify(p.arguments).includes(`"documents/${path}"`);

function propose(files: { path: string; content: string }[], why = 'so that I can tell you the weather') {
  return stack.ipc(family, 'tool.invoke.propose_write', { files, why }, { timeoutMs: 25_000 });
}

describe('a new skill', () => {
  it('the person sees every file; until their yes the skill does not exist; after it, exactly what they saw is written', async () => {
    const files = [
      { path: 'skills/weather/SKILL.md', content: SKILL_MD },
      { path: 'skills/weather/skill.json', content: SKILL_JSON },
      { path: 'skills/weather/scripts/today.py', content: SCRIPT },
    ];
    const call = propose(files);
    const pending = await stack.pendingConfirmation('family', proposes('weather'));
    expect(pending.description.state).toEqual([
      'skill "weather" does not exist yet; this creates it',
      `SKILL.md: new file, ${Buffer.byteLength(SKILL_MD)} bytes`,
      `skill.json: new file, ${Buffer.byteLength(SKILL_JSON)} bytes`,
      `scripts/today.py: new file, ${Buffer.byteLength(SCRIPT)} bytes`,
    ]);
    // The whole change is in what the person reads (the console shows `full`).
    expect(pending.description.full).toContain('print(\\"sunny in\\", sys.argv[1])');
    expect(pending.description.full).toContain('api.open-meteo.com');
    expect(existsSync(join(skills, 'weather'))).toBe(false);
    stack.core.confirmations.resolve(pending.id, true, 'test');
    const r = await call;
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ skill: 'weather', created: true, written: files.map((f) => ({ path: f.path.replace('skills/weather/', ''), bytes: Buffer.byteLength(f.content) })) });
    expect(readFileSync(join(skills, 'weather', 'SKILL.md'), 'utf8')).toBe(SKILL_MD);
    expect(readFileSync(join(skills, 'weather', 'scripts', 'today.py'), 'utf8')).toBe(SCRIPT);
    const audit = await stack.auditEntries();
    expect(audit.some((e) => e.topic === 'tool.invoke.propose_write' && e.stage === 'handler' && e.reason?.startsWith(`skill "weather" created after a person's yes: SKILL.md (${Buffer.byteLength(SKILL_MD)} bytes)`))).toBe(true);
  });

  it('a no writes nothing', async () => {
    const call = propose([{ path: 'skills/refused/SKILL.md', content: '# no' }]);
    const pending = await stack.pendingConfirmation('family', proposes('refused'));
    stack.core.confirmations.resolve(pending.id, false, 'test');
    expectError(await call, 'CONFIRMATION_DENIED', { stage: 5 });
    expect(existsSync(join(skills, 'refused'))).toBe(false);
  });
});

describe('changing a skill', () => {
  it('the person sees what each file replaces; a skill changed after the prompt is not written over', async () => {
    const changed = 'import sys\nprint("rain in", sys.argv[1])\n';
    const call = propose([{ path: 'skills/weather/scripts/today.py', content: changed }, { path: 'skills/weather/SKILL.md', content: SKILL_MD }]);
    const pending = await stack.pendingConfirmation('family', proposes('weather'));
    expect(pending.description.state).toEqual([
      'skill "weather" exists (3 files); this changes it',
      `scripts/today.py: replaces the current ${Buffer.byteLength(SCRIPT)} bytes (sha256 ${(await sha(SCRIPT)).slice(0, 12)}) with ${Buffer.byteLength(changed)} bytes`,
      'SKILL.md: unchanged',
    ]);
    // Someone changes the skill while the prompt waits (the person, by hand).
    writeFileSync(join(skills, 'weather', 'scripts', 'today.py'), 'print("edited by hand")\n');
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expectError(await call, 'STATE_CHANGED', { stage: 5 });
    expect(readFileSync(join(skills, 'weather', 'scripts', 'today.py'), 'utf8')).toBe('print("edited by hand")\n');
  });
});

describe('what cannot be proposed', () => {
  it.each([
    ['outside skills', 'memory/notes.md'],
    ['a path out of the skill', 'skills/weather/../../config/carapace.json'],
    ['a hidden file', 'skills/weather/.bashrc'],
    ['a name that is not a skill name', 'skills/Weather/SKILL.md'],
    ['the skill folder itself', 'skills/weather'],
    ['an absolute path', '/etc/passwd'],
    ['a path out of documents', 'documents/../config/carapace.json'],
    ['a hidden document', 'documents/.profile'],
    ['the documents folder itself', 'documents'],
    ['a document nine folders deep', 'documents/a/b/c/d/e/f/g/h/i.txt'],
  ])('%s (%s): refused before anyone is asked', async (_what, path) => {
    expectError(await propose([{ path, content: 'x' }]), 'VALIDATION_FAILED', { stage: 3 });
  });

  it('two skills in one proposal, or one file twice: refused', async () => {
    expectError(await propose([{ path: 'skills/a/x.py', content: '1' }, { path: 'skills/b/x.py', content: '2' }]), 'VALIDATION_FAILED');
    expectError(await propose([{ path: 'skills/a/x.py', content: '1' }, { path: 'skills/a/x.py', content: '2' }]), 'VALIDATION_FAILED');
    const mixed = expectError(await propose([{ path: 'documents/a.md', content: '1' }, { path: 'skills/a/x.py', content: '2' }]), 'VALIDATION_FAILED');
    expect(mixed.message).toContain('one place per proposal');
  });

  it('a script hiding characters: reordering ones are refused; invisible ones are shown, escaped, and said first', async () => {
    expectError(await propose([{ path: 'skills/sly/run.sh', content: 'echo safe \u202e; rm -rf ~ #\n' }]), 'VALIDATION_FAILED', { stage: 5 });
    const call = propose([{ path: 'skills/sly/run.sh', content: 'curl https://exa\u200bmple.com\n' }]);
    const pending = await stack.pendingConfirmation('family', proposes('sly'));
    expect(pending.description.warnings.join(' ')).toContain('zero-width');
    expect(pending.description.full).toContain('exa⟦U+200B⟧mple.com');
    stack.core.confirmations.resolve(pending.id, false, 'test');
    expectError(await call, 'CONFIRMATION_DENIED');
    expect(existsSync(join(skills, 'sly'))).toBe(false);
  });

  it('a planted link in the skills folder is never written through, even after a yes', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'planted-'));
    mkdirSync(skills, { recursive: true });
    symlinkSync(elsewhere, join(skills, 'linked'));
    const call = propose([{ path: 'skills/linked/SKILL.md', content: '# through the link' }]);
    const pending = await stack.pendingConfirmation('family', proposes('linked'));
    expect(pending.description.warnings[0]).toContain('nothing can be written: skills/linked is a symbolic link');
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expectError(await call, 'WRITE_REFUSED');
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});

describe("the person's documents", () => {
  const LIST = '# Shopping\n\n- milk\n- bread\n';
  const PLAN = 'Monday: dentist at 9\n';

  it('a document is written only after the yes, exactly as the person saw it', async () => {
    const call = propose([{ path: 'documents/shopping.md', content: LIST }, { path: 'documents/notes/2026/plan.txt', content: PLAN }], 'the list you asked for');
    const pending = await stack.pendingConfirmation('family', proposesDocument('shopping.md'));
    expect(pending.description.state).toEqual([
      'into your documents folder (2 files)',
      `shopping.md: new file, ${Buffer.byteLength(LIST)} bytes`,
      `notes/2026/plan.txt: new file, ${Buffer.byteLength(PLAN)} bytes`,
    ]);
    expect(pending.description.full).toContain('- milk');
    expect(existsSync(join(documents, 'shopping.md'))).toBe(false);
    stack.core.confirmations.resolve(pending.id, true, 'test');
    const r = await call;
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ documents: true, written: [{ path: 'documents/shopping.md', bytes: Buffer.byteLength(LIST) }, { path: 'documents/notes/2026/plan.txt', bytes: Buffer.byteLength(PLAN) }] });
    expect(readFileSync(join(documents, 'shopping.md'), 'utf8')).toBe(LIST);
    expect(readFileSync(join(documents, 'notes', '2026', 'plan.txt'), 'utf8')).toBe(PLAN);
    const audit = await stack.auditEntries();
    expect(audit.some((e) => e.topic === 'tool.invoke.propose_write' && e.stage === 'handler' && e.reason?.startsWith(`documents written after a person's yes: shopping.md (${Buffer.byteLength(LIST)} bytes)`))).toBe(true);
  });

  it('replacing a large file: the person sees its size and time (it is not read whole); changed meanwhile, it is not written over', async () => {
    mkdirSync(documents, { recursive: true });
    const big = join(documents, 'archive.txt');
    writeFileSync(big, Buffer.alloc(3 * 1024 * 1024, 'a'));
    const call = propose([{ path: 'documents/archive.txt', content: 'short now\n' }]);
    const pending = await stack.pendingConfirmation('family', proposesDocument('archive.txt'));
    expect(pending.description.state?.[1]).toBe(`archive.txt: replaces the current ${3 * 1024 * 1024} bytes (last changed ${statSync(big).mtime.toISOString()}) with 10 bytes`);
    writeFileSync(big, 'the person wrote this meanwhile\n', { flag: 'a' });
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expectError(await call, 'STATE_CHANGED', { stage: 5 });
    expect(statSync(big).size).toBe(3 * 1024 * 1024 + 32);
  });

  it('a link or a fifo planted in documents: never written through or read, nothing hangs', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'planted-'));
    mkdirSync(documents, { recursive: true });
    symlinkSync(elsewhere, join(documents, 'linked'));
    const call = propose([{ path: 'documents/linked/notes.md', content: '# through the link' }]);
    const pending = await stack.pendingConfirmation('family', proposesDocument('linked/notes.md'));
    expect(pending.description.warnings[0]).toContain('nothing can be written: documents/linked is a symbolic link');
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expectError(await call, 'WRITE_REFUSED');
    expect(readdirSync(elsewhere)).toEqual([]);

    execFileSync('mkfifo', [join(documents, 'pipe.txt')]);
    const fifo = propose([{ path: 'documents/pipe.txt', content: 'x' }]);
    const asked = await stack.pendingConfirmation('family', proposesDocument('pipe.txt'));
    expect(asked.description.warnings[0]).toContain('documents/pipe.txt is not a regular file');
    stack.core.confirmations.resolve(asked.id, true, 'test');
    expectError(await fifo, 'WRITE_REFUSED');
    expect(statSync(join(documents, 'pipe.txt')).isFIFO()).toBe(true);
  });
});

describe('a proposed skill and the skills the agent can run', () => {
  it('exists for list_skills and run_skill only after the yes; its secret is scrubbed from then on', async () => {
    const KEY = 'weather-key-5e0c77d2a1';
    const asked: RunCommand[] = [];
    const programs = {
      runIn: async (_session: Session, _call: unknown, cmd: RunCommand) => {
        asked.push(cmd);
        return { run_id: '20260101-000000-abcdef', exit_code: 0, timed_out: false, killed: null, duration_ms: 5, stdout: (cmd.env ?? []).join('\n'), stderr: '', stdout_cut_bytes: 0, stderr_cut_bytes: 0, stdout_bytes: 1, stderr_bytes: 0, outputs: [], refused_outputs: [], refused_count: 0 };
      },
    };
    const wired = skillRuns({ programs: { runs: programs } as never, runtime: { docker: {}, hostPath: async (p: string) => p } as never, settings: parseConfig({}).sandbox, folders: { bundled: null, own: skills }, sections: {}, audit: stack.core.audit, log: pino({ level: 'silent' }), relayDir: join(stack.dir, 'relays'), env: { SKILL_FORECAST_KEY: KEY } });
    stack.core.acceptRuns({ run: async () => ({}) }, async () => undefined, wired);
    const names = async () => (await stack.ipc(family, 'tool.invoke.list_skills', {})).out.skills.map((s: { name: string }) => s.name);
    expect(await names()).not.toContain('forecast');

    const files = [
      { path: 'skills/forecast/SKILL.md', content: '# Forecast\nRun forecast.py <city>.\n' },
      { path: 'skills/forecast/skill.json', content: JSON.stringify({ name: 'forecast', description: 'the forecast', secrets: ['SKILL_FORECAST_KEY'] }) },
      { path: 'skills/forecast/forecast.py', content: 'import os\nprint(os.environ["SKILL_FORECAST_KEY"])\n' },
    ];
    const call = propose(files, 'to tell you the forecast');
    const pending = await stack.pendingConfirmation('family', proposes('forecast'));
    expect(await names()).not.toContain('forecast');
    expectError(await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'forecast', script: 'forecast.py' }), 'VALIDATION_FAILED');
    stack.core.confirmations.resolve(pending.id, true, 'test');
    expect((await call).code).toBe(0);

    expect(await names()).toContain('forecast');
    const r = await stack.ipc(family, 'tool.invoke.run_skill', { skill: 'forecast', script: 'forecast.py' });
    expect(r.code).toBe(0);
    expect(asked.at(-1)!.env).toContain(`SKILL_FORECAST_KEY=${KEY}`);
    expect(r.stdout).not.toContain(KEY);
    expect(r.out.stdout).toContain('SKILL_FORECAST_KEY=[REDACTED]');
  });
});

async function sha(text: string): Promise<string> {
  const { createHash } = await import('node:crypto');
  return createHash('sha256').update(text).digest('hex');
}
