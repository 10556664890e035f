// Skills through the real pipeline: a real agent container calling run_skill with the real
// `ipc`, the core's six stages, a real skill sandbox (under the agents' runtime) with its
// relay and forwarder, and a stand-in "public" web server on an internal Docker network of
// a public subnet (support/skills.ts; names resolved by the test's table through the
// relay's injectable resolver). The bundled fetch skill reads a page; every private target
// is refused with its code and audited; the sandbox is hardened and goes with the session.
// Needs `make images`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import { eventually, Stack } from '../harness.js';
import { AGENT_RUNTIME, newAgentManager, testRuntime } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { wireRuns } from '../support/sandbox-runs.js';
import { writeSkill } from '../support/skill-folders.js';
import { fetched, PublicStandIn, runSkill, SEARX_HOST, STANDIN_ADDRESS, testResolver, WEB_HOST, wireSkills } from '../support/skills.js';
import { PAGE, SEARCH_RESULTS } from '../support/web-standins.js';

let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let web: PublicStandIn;
let programs: SandboxRuns;
let agent: string;
let session: string;
const asked: string[] = [];
const instance = `skills-${process.pid}`;
const SEARCH_KEY = 'search-key-5b1d0e9c7f';
/** In the Dockerfile of the person's own skill: a folder of a new hash each run, so its image is built here. */
const STAMP = `stamp-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  runtime = testRuntime();
  web = await PublicStandIn.start(runtime, String(process.pid));
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-0000', agents: { run_timeout_ms: 60_000 }, instance, runtime, groups: ['family'] });
  await manager.removeOrphans();
  programs = wireRuns(stack, manager, runtime, instance, {}, false);
  const own = mkdtempSync(join(tmpdir(), 'own-skills-'));
  const show = { 'show.sh': 'cat /opt/stamp.txt\n' };
  writeSkill(own, 'stamped', { manifest: { name: 'stamped', description: 'Shows what its image was built with' }, files: { ...show, Dockerfile: `FROM carapace-sandbox:latest\nUSER root\nRUN printf 'built with ${STAMP}\\n' > /opt/stamp.txt\n` } });
  writeSkill(own, 'unbuildable', { manifest: { name: 'unbuildable', description: 'Its Dockerfile fails' }, files: { ...show, Dockerfile: `FROM carapace-sandbox:latest\nRUN echo ${STAMP} && exit 3\n` } });
  wireSkills(stack, runtime, programs, { own, resolve: testResolver(asked), sections: { 'web-search': { searxng_url: `http://${SEARX_HOST}` } }, env: { SKILL_WEB_SEARCH_API_KEY: SEARCH_KEY } });
  await manager.enqueue('family', 'warm up').catch(() => undefined);
  ({ container: agent, session } = manager.live('family')!);
}, 240_000);

afterAll(async () => {
  await manager?.stop();
  await programs?.sandboxes.stop();
  await standIn?.stop();
  await stack?.stop();
  await web?.stop();
  for (const image of await runtime.docker.listImages({ filters: JSON.stringify({ label: ['carapace.skill=stamped'] }) })) await runtime.docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
});

describe('the fetch skill', () => {
  let sandbox: string;

  it('reads a page of a public host as text: the answer is external content, the session labelled', async () => {
    expect(stack.core.sessions.get(session)?.untrustedInput).toBeFalsy();
    const call = await runSkill(runtime, agent, { skill: 'fetch', script: 'fetch.py', args: [`http://${WEB_HOST}/page.html`] });
    expect(call.error).toBeNull();
    expect(call.result).toMatchObject({ skill: 'fetch', exit_code: 0, external_content: true });
    const page = fetched(call);
    expect(page).toMatchObject({ status: 200, title: PAGE.title, final_url: `http://${WEB_HOST}/page.html` });
    expect(page.text).toContain(PAGE.paragraph);
    for (const hidden of PAGE.hidden) expect(page.text).not.toContain(hidden);
    expect(stack.core.sessions.get(session)?.untrustedInput).toBe(true);
    sandbox = programs.sandboxes.containerOf(session, 'skill:fetch')!;
    expect(sandbox).toMatch(/^[0-9a-f]{64}$/);
    expect(asked).toContain(WEB_HOST);
    console.log(`[figures] fetch, first run (cold: sandbox, forwarder, relay, page): ${call.ms} ms through ipc, ${call.result!.duration_ms} ms in the sandbox`);
  }, 120_000);

  it('a second run is warm (the same sandbox), follows a redirect hop by hop, and reads an address given as such', async () => {
    const before = asked.length;
    const call = await runSkill(runtime, agent, { skill: 'fetch', script: 'fetch.py', args: [`http://${WEB_HOST}/redirect-page`] });
    expect(fetched(call)).toMatchObject({ status: 200, redirects: [{ status: 302, to: `http://${WEB_HOST}/page.html` }] });
    // One resolution per CONNECT, made by the relay (two hops).
    expect(asked.slice(before)).toEqual([WEB_HOST, WEB_HOST]);
    expect(programs.sandboxes.containerOf(session, 'skill:fetch')).toBe(sandbox);
    const literal = await runSkill(runtime, agent, { skill: 'fetch', script: 'fetch.py', args: [`http://${STANDIN_ADDRESS}/page.html`] });
    expect(fetched(literal).title).toBe(PAGE.title);
    console.log(`[figures] fetch, warm run: ${call.ms} ms through ipc (two hops)`);
  }, 60_000);

  it.each([
    ['http://127.0.0.1/', 'ADDRESS_NOT_PUBLIC'],
    ['http://10.0.0.1/', 'ADDRESS_NOT_PUBLIC'],
    ['http://169.254.169.254/latest/meta-data/', 'ADDRESS_NOT_PUBLIC'],
    ['http://[::1]/', 'ADDRESS_NOT_PUBLIC'],
    ['http://private.test/', 'ADDRESS_NOT_PUBLIC'],
    ['http://rebind.test/page.html', 'ADDRESS_NOT_PUBLIC'],
    [`http://${WEB_HOST}/redirect-private`, 'ADDRESS_NOT_PUBLIC'],
    [`http://${WEB_HOST}/redirect-metadata`, 'ADDRESS_NOT_PUBLIC'],
    ['http://nowhere.test/', 'DNS_FAILED'],
    ['file:///etc/passwd', 'BAD_URL'],
  ])('%s is refused: %s', async (url, code) => {
    const call = await runSkill(runtime, agent, { skill: 'fetch', script: 'fetch.py', args: [url] });
    expect(call.result?.exit_code).toBe(2);
    expect(fetched(call).error.code).toBe(code);
  }, 60_000);

  it('each refusal is audited with its code and the skill named', async () => {
    const refusals = stack.core.audit.query({ group: 'family', session, outcome: 'rejected', last_n: 100 }).filter((e) => e.topic === 'tool.invoke.run_skill');
    expect(refusals.map((e) => e.code)).toEqual(expect.arrayContaining(['ADDRESS_NOT_PUBLIC', 'DNS_FAILED']));
    expect(refusals.find((e) => e.reason?.includes('169.254.169.254:80'))?.reason).toMatch(/^skill fetch: connection to 169\.254\.169\.254:80 refused/);
    const runs = stack.core.audit.query({ group: 'family', session, last_n: 100 }).filter((e) => e.topic === 'tool.invoke.run_skill' && e.stage === 'handler' && e.reason?.startsWith('run '));
    expect(runs.at(-1)?.reason).toMatch(/python3 skill fetch: fetch\.py file:\/\/\/etc\/passwd, exit \d+ after \d+ ms/);
  });

  it('its sandbox is hardened like run_program\'s, with no network, its folder and its relay read-only, nothing secret', async () => {
    const info = await runtime.inspect(sandbox);
    const host = info.HostConfig;
    expect(host.Runtime).toBe((await runtime.sandbox()).runtime);
    if (AGENT_RUNTIME !== 'auto') expect(host.Runtime).toBe(AGENT_RUNTIME);
    expect(host.NetworkMode).toBe('none');
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.CapDrop).toEqual(['ALL']);
    expect(host.SecurityOpt).toEqual(['no-new-privileges']);
    expect(host.Binds).toEqual([expect.stringMatching(/:\/workspace:ro$/), expect.stringMatching(/\/skills\/fetch:\/skill:ro$/), expect.stringMatching(/:\/run\/carapace-skill:ro$/)]);
    expect(info.Config.User).toBe('65534:65534');
    expect(info.Config.Labels).toMatchObject({ 'carapace.skill': 'fetch', 'carapace.role': 'sandbox' });
    expect(info.Config.Env ?? []).not.toEqual(expect.arrayContaining([expect.stringMatching(/KEY|TOKEN|SECRET|SKILL_|PROXY/)]));
  });
});

describe('the web-search skill', () => {
  it('asks the SearXNG its settings name (a configured host, allowed for it alone) and answers the results', async () => {
    const call = await runSkill(runtime, agent, { skill: 'web-search', script: 'search.py', args: ['carapace agent'] });
    expect(call.error).toBeNull();
    expect(call.result?.stdout).not.toContain('error');
    expect(call.result).toMatchObject({ skill: 'web-search', exit_code: 0, external_content: true });
    const answer = fetched(call);
    expect(answer).toMatchObject({ query: 'carapace agent', source: 'searxng' });
    expect(answer.results).toEqual(SEARCH_RESULTS.map((r) => ({ title: r.title, url: r.url, snippet: r.content })));
  }, 120_000);

  it('reaches no other host, though it is public', async () => {
    const call = await runSkill(runtime, agent, { skill: 'web-search', script: 'search.py', args: ['x', '--url', `http://${WEB_HOST}`] });
    expect(fetched(call).error.code).toBe('HOST_NOT_ALLOWED');
  }, 60_000);
});

describe("a skill's own Dockerfile", () => {
  it('is built by the engine, tagged by the folder\'s hash, its image reused, and its runs have what it put there', async () => {
    const first = await runSkill(runtime, agent, { skill: 'stamped', script: 'show.sh' });
    expect(first.result).toMatchObject({ exit_code: 0, stdout: `built with ${STAMP}\n` });
    const images = await runtime.docker.listImages({ filters: JSON.stringify({ label: ['carapace.skill=stamped'] }) });
    const tags = images.flatMap((i) => i.RepoTags ?? []);
    expect(tags).toEqual([expect.stringMatching(/^carapace-skill-stamped:[0-9a-f]{16}$/)]);
    const again = await runSkill(runtime, agent, { skill: 'stamped', script: 'show.sh' });
    expect(again.result).toMatchObject({ exit_code: 0, stdout: `built with ${STAMP}\n` });
    expect((await runtime.docker.listImages({ filters: JSON.stringify({ label: ['carapace.skill=stamped'] }) })).map((i) => i.Id)).toEqual(images.map((i) => i.Id));
  }, 180_000);

  it('one that does not build: an error value, the engine\'s words in the audit log, nothing run', async () => {
    const call = await runSkill(runtime, agent, { skill: 'unbuildable', script: 'show.sh' });
    expect(call.error).toMatchObject({ code: 'SKILL_IMAGE_FAILED', message: 'skill unbuildable: its Dockerfile did not build' });
    const entry = stack.core.audit.query({ group: 'family', last_n: 50 }).reverse().find((e) => e.code === 'SKILL_IMAGE_FAILED' && e.stage === 'handler');
    expect(entry?.detail).toMatch(/non-zero code: 3/);
    expect(programs.sandboxes.containerOf(session, 'skill:unbuildable')).toBeNull();
  }, 180_000);
});

describe('the session ends', () => {
  it('its skill sandboxes and their relays go with it', async () => {
    const fetchBox = programs.sandboxes.containerOf(session, 'skill:fetch')!;
    await manager.stop();
    await eventually(async () => (await runtime.docker.getContainer(fetchBox).inspect().then(() => true, () => false)) === false, 30_000);
    expect(programs.sandboxes.containerOf(session, 'skill:fetch')).toBeNull();
  }, 60_000);
});
