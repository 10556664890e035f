// Attacks from inside a skill's sandbox (docker exec as uid 1000, node there), and from the
// agent: a host not on the skill's list, direct TCP, UDP and DNS, another skill's secret,
// the relay flooded (1000 connections, a CONNECT line far too long, a slow sender) while
// the core keeps answering, and the agent's container holding no skill secret and no relay.
// Under the agents' runtime; `make test` runs it again under runc. Needs `make images`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import { Stack } from '../harness.js';
import { newAgentManager, sh, testRuntime } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { invokeTool, wireRuns } from '../support/sandbox-runs.js';
import { writeSkill } from '../support/skill-folders.js';
import { PublicStandIn, runSkill, STANDIN_ADDRESS, testResolver, WEB_HOST, wireSkills } from '../support/skills.js';

let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let web: PublicStandIn;
let programs: SandboxRuns;
let agent: string;
let session: string;
let probeBox: string;
let fetchBox: string;
const instance = `skill-attacks-${process.pid}`;
const PROBE_TOKEN = 'probe-token-91c3d7a2e0';
const SEARCH_KEY = 'search-key-0c8e1f4b6a';

/** A CONNECT through the sandbox's proxy (127.0.0.1:3128), from inside: the status line and the refusal code. */
const CONNECT = (target: string) => `const s=require('net').connect(3128,'127.0.0.1',()=>s.write('CONNECT ${target} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'));let b='';s.on('data',d=>{b+=d;if(b.includes('\\r\\n\\r\\n')){console.log(b.split('\\r\\n').filter(l=>/^HTTP|refused/i.test(l)).join(' | '));process.exit(0)}});s.on('error',e=>{console.log('error '+e.code);process.exit(0)});setTimeout(()=>{console.log('timeout');process.exit(0)},20000)`;

async function inBox(box: string, script: string, user = '1000:1000'): Promise<{ code: number | null; out: string; err: string }> {
  const exec = await runtime.docker.getContainer(box).exec({ Cmd: ['node', '-e', script], User: user, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  let out = '';
  let err = '';
  const { PassThrough } = await import('node:stream');
  const o = new PassThrough();
  const e = new PassThrough();
  runtime.docker.modem.demuxStream(stream, o, e);
  o.on('data', (d: Buffer) => (out += d));
  e.on('data', (d: Buffer) => (err += d));
  await new Promise((resolve) => stream.on('end', resolve));
  return { code: (await exec.inspect()).ExitCode ?? null, out, err };
}

beforeAll(async () => {
  runtime = testRuntime();
  web = await PublicStandIn.start(runtime, `a${process.pid}`);
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-0000', agents: { run_timeout_ms: 60_000 }, instance, runtime, groups: ['family'] });
  await manager.removeOrphans();
  programs = wireRuns(stack, manager, runtime, instance, {}, false);
  const own = mkdtempSync(join(tmpdir(), 'own-skills-'));
  writeSkill(own, 'probe', { manifest: { name: 'probe', description: 'An attacker\'s skill', network: { hosts: [`${WEB_HOST}:80`] }, secrets: ['SKILL_PROBE_TOKEN'] }, files: { 'env.sh': 'env | grep -c ^SKILL_ || true; echo "$SKILL_PROBE_TOKEN"\n' } });
  wireSkills(stack, runtime, programs, { own, resolve: testResolver(), env: { SKILL_PROBE_TOKEN: PROBE_TOKEN, SKILL_WEB_SEARCH_API_KEY: SEARCH_KEY } });
  await manager.enqueue('family', 'warm up').catch(() => undefined);
  ({ container: agent, session } = manager.live('family')!);
  const probe = await runSkill(runtime, agent, { skill: 'probe', script: 'env.sh' });
  expect(probe.result).toMatchObject({ exit_code: 0, stdout: '1\n[REDACTED]\n' });
  await runSkill(runtime, agent, { skill: 'fetch', script: 'fetch.py', args: [`http://${WEB_HOST}/page.html`] });
  probeBox = programs.sandboxes.containerOf(session, 'skill:probe')!;
  fetchBox = programs.sandboxes.containerOf(session, 'skill:fetch')!;
  // A second after each run the core kills whatever uid 1000 left running in the sandbox:
  // the attacks below run as uid 1000 too, and would be swept mid-way.
  await Promise.all(['skill:probe', 'skill:fetch'].map((key) => programs.sandboxes.swept(session, key)));
}, 300_000);

afterAll(async () => {
  await manager?.stop();
  await programs?.sandboxes.stop();
  await standIn?.stop();
  await stack?.stop();
  await web?.stop();
});

describe('from inside a skill sandbox', () => {
  it('a host not on its list is refused by the relay (even the stand-in, by its address), and audited', async () => {
    expect((await inBox(probeBox, CONNECT(`${WEB_HOST}:80`))).out).toMatch(/^HTTP\/1.1 200/);
    for (const target of [`${STANDIN_ADDRESS}:80`, `${WEB_HOST}:443`, 'searx.carapace-test.example:80']) {
      expect((await inBox(probeBox, CONNECT(target))).out).toMatch(/403 Forbidden \| x-carapace-refused: HOST_NOT_ALLOWED/);
    }
    const audited = stack.core.audit.query({ group: 'family', session, outcome: 'rejected', last_n: 50 }).filter((e) => e.code === 'HOST_NOT_ALLOWED');
    expect(audited.map((e) => e.reason)).toContainEqual(expect.stringContaining(`skill probe: connection to ${STANDIN_ADDRESS}:80 refused`));
  }, 60_000);

  it('has no network of its own: direct TCP, UDP and DNS fail', async () => {
    const r = await inBox(probeBox, `const net=require('net'),dgram=require('dgram'),dns=require('dns');const out=[];
      const t=net.connect(80,'${STANDIN_ADDRESS}');t.on('connect',()=>{out.push('tcp connected');t.destroy()});t.on('error',e=>out.push('tcp '+e.code));
      const u=dgram.createSocket('udp4');u.send('x',53,'${STANDIN_ADDRESS}',e=>{out.push('udp '+(e?e.code:'sent'));u.close()});
      dns.lookup('${WEB_HOST}',e=>out.push('dns '+(e?e.code:'resolved')));
      setTimeout(()=>{console.log(out.sort().join(','))},3000)`);
    expect(r.out).not.toMatch(/tcp connected|dns resolved/);
    expect({ ...r, out: r.out.match(/tcp E[A-Z]+/)?.[0] }).toMatchObject({ code: 0, out: expect.stringMatching(/^tcp E/) });
    expect(r.out).toMatch(/dns E[A-Z]+/);
    const interfaces = await inBox(probeBox, "console.log(Object.keys(require('os').networkInterfaces()).join(','))");
    expect(interfaces.out.trim()).toBe('lo');
  }, 30_000);

  it("another skill's secret is nowhere in it: not its environment, not /proc/1/environ, not the container's configuration; its own only in its runs", async () => {
    const environ = "console.log(require('fs').readFileSync('/proc/'+process.argv[1]+'/environ','latin1'))";
    for (const box of [fetchBox, probeBox]) {
      const self = await inBox(box, "console.log(JSON.stringify(process.env))");
      // As the main process's own user (nobody): root without capabilities may not read it under runc.
      const init = await inBox(box, environ.replace("process.argv[1]", "'1'"), '65534:65534');
      expect(init.code).toBe(0);
      const config = JSON.stringify((await runtime.inspect(box)).Config);
      for (const text of [self.out, init.out, config]) {
        expect(text).not.toContain(SEARCH_KEY);
        expect(text).not.toContain('sk-ant-test');
      }
      // The probe's own token is in none of these either: only a run's environment has it.
      expect(init.out + config).not.toContain(PROBE_TOKEN);
    }
    expect((await inBox(fetchBox, "console.log(JSON.stringify(process.env))")).out).not.toContain(PROBE_TOKEN);
    // (Under gVisor a run, uid 1000, may read the main process's environment: it holds nothing.)
  }, 60_000);

  it('floods the relay (1000 connections, a 1 MB CONNECT line, a slow sender): bounded, the core keeps answering, the relay serves again after', async () => {
    const flood = inBox(probeBox, `const net=require('net');let refused=0,open=0;const all=[];
      for(let i=0;i<1000;i++){const s=net.connect(3128,'127.0.0.1');all.push(s);s.on('connect',()=>open++);s.on('error',()=>refused++);s.on('close',()=>{})}
      const big=net.connect(3128,'127.0.0.1',()=>big.write('CONNECT '+'a'.repeat(1<<20)+':80 HTTP/1.1\\r\\n\\r\\n'));big.on('error',()=>{});
      const slow=net.connect(3128,'127.0.0.1');slow.on('error',()=>{});let i=0;const line='CONNECT ${WEB_HOST}:80 HTTP/1.1\\r\\n';const t=setInterval(()=>slow.write(line[i++%line.length]),500);
      setTimeout(()=>{clearInterval(t);all.forEach(s=>s.destroy());console.log('held',open,'errors',refused);process.exit(0)},8000)`);
    await new Promise((r) => setTimeout(r, 2000));
    const started = performance.now();
    const tools = await invokeTool<{ tools: unknown[] }>(runtime, agent, 'list_tools', {});
    const ms = Math.round(performance.now() - started);
    expect(tools.code).toBe(0);
    const done = await flood;
    expect(done.out).toMatch(/^held \d+ errors \d+/);
    await new Promise((r) => setTimeout(r, 12_000));
    expect((await inBox(probeBox, CONNECT(`${WEB_HOST}:80`))).out).toMatch(/^HTTP\/1.1 200/);
    console.log(`[figures] during a flood of the relay from a skill sandbox: list_tools through ipc ${ms} ms`);
  }, 90_000);
});

describe("the agent's own container", () => {
  it('holds no skill secret and no relay socket', async () => {
    const r = await sh(runtime, agent, "env | grep -c '^SKILL_' ; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n' | grep -c SKILL_ ; find / -xdev -name 'relay.sock' 2>/dev/null | wc -l; ls -A /run/carapace");
    expect(r.out.split('\n').slice(0, 3)).toEqual(['0', '0', '0']);
    expect(r.out).not.toContain(PROBE_TOKEN);
    expect(r.out).not.toContain('skill');
    const mounts = (await runtime.inspect(agent)).Mounts.map((m) => `${m.Source} ${m.Destination}`).join('\n');
    expect(mounts).not.toMatch(/skill-relays|\/skills\//);
  }, 30_000);

  it("reaches neither the person's documents nor their skills except by a proposal a person sees: nothing of them is mounted, and a proposal aimed out of its place is refused before anyone is asked", async () => {
    const mounts = (await runtime.inspect(agent)).Mounts.map((m) => `${m.Source} ${m.Destination}`).join('\n');
    expect(mounts).not.toContain(join(stack.dataDir, 'documents'));
    expect(mounts).not.toContain(join(stack.dataDir, 'skills'));
    for (const path of ['documents/../skills/evil/SKILL.md', 'documents/.ssh/authorized_keys', 'skills/probe/../../documents/x.md', '/app/volumes/data/documents/x.md']) {
      const r = await invokeTool(runtime, agent, 'propose_write', { why: 'to help', files: [{ path, content: 'x' }] });
      expect(r.error).toMatchObject({ code: 'VALIDATION_FAILED', stage: 3 });
    }
    expect(stack.core.confirmations.list('family')).toEqual([]);
  }, 60_000);
});
