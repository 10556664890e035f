// run_program through the real pipeline: a real agent container, the real `ipc` inside it
// as uid 1000, the core's six stages, a real sandbox container from carapace-sandbox (under
// the agents' runtime: gVisor where the engine has it; `make test` runs this suite again
// under runc). A chart from a CSV comes back into the workspace; a second run reuses the
// warm sandbox; the sandbox goes with the session. Needs `make images`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import { FileStore } from '../../src/files/file-store.js';
import { startAdminApi } from '../../src/admin/http-api.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import type { AddressInfo } from 'node:net';
import { launchBrowser, logIn } from '../support/browser.js';
import { eventually, ROOT, Stack } from '../harness.js';
import { AGENT_RUNTIME, newAgentManager, sh as shIn, testRuntime } from '../support/agents.js';
import { AnthropicStandIn, toolResults, type Policy } from '../support/anthropic-standin.js';
import { runProgram, wireRuns, writeIn } from '../support/sandbox-runs.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const CSV = 'month,total\njan,12\nfeb,19\nmar,7\n';
const CHART = `import sys
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv(sys.argv[1])
print(f"rows: {len(df)} sum: {df.total.sum()}")
df.plot(x="month", y="total", kind="bar")
plt.savefig("/out/chart.png")
`;

let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let programs: SandboxRuns;
let agent: string;
let session: string;
let groupsDir: string;
let files: FileStore;
const instance = `runs-${process.pid}`;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], extraPluginDirs: { webchat: join(ROOT, 'plugins/webchat') }, config: { groups: { family: {}, kids: { tools: ['echo'] } } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  groupsDir = join(stack.dir, 'groups');
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-0000', agents: { run_timeout_ms: 60_000 }, instance, runtime, groups: ['family', 'kids'] });
  await manager.removeOrphans();
  programs = wireRuns(stack, manager, runtime, instance);
  files = new FileStore(join(stack.dir, 'files'));
  stack.core.acceptFiles({ read: (c, p, max) => runtime.readFile(c, p, max), store: files });
  await manager.enqueue('family', 'warm up').catch(() => undefined);
  ({ container: agent, session } = manager.live('family')!);
}, 180_000);

afterAll(async () => {
  await manager?.stop();
  await programs?.sandboxes.stop();
  await standIn?.stop();
  await stack?.stop();
});

const sh = (script: string) => shIn(runtime, agent, script);

describe('a run through the pipeline', () => {
  let first: Awaited<ReturnType<typeof runProgram>>;
  let sandbox: string;

  it('charts a CSV from the workspace: the PNG comes back under runs/<id>/, owned by the agent, with its stdout and exit code', async () => {
    await writeIn(runtime, agent, 'data/sales.csv', CSV);
    await writeIn(runtime, agent, 'scripts/chart.py', CHART);
    first = await runProgram(runtime, agent, { program: 'scripts/chart.py', args: ['data/sales.csv'] });
    sandbox = programs.sandboxes.containerOf(session)!;
    expect(first.error).toBeNull();
    const r = first.result!;
    expect(r).toMatchObject({ exit_code: 0, timed_out: false, killed: null, stdout: 'rows: 3 sum: 38\n', stdout_cut_bytes: 0, refused_outputs: [], refused_count: 0 });
    expect(r.run_id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    expect(r.outputs).toEqual([{ path: `runs/${r.run_id}/chart.png`, bytes: expect.any(Number) }]);
    // On the host (quotas off: the workspace is a folder) and as the agent sees it.
    const file = join(groupsDir, 'family', r.outputs[0].path);
    const bytes = readFileSync(file);
    expect(bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(bytes.length).toBe(r.outputs[0].bytes);
    expect([statSync(file).uid, statSync(file).gid, statSync(file).mode & 0o777]).toEqual([1000, 1000, 0o644]);
    const seen = await sh(`stat -c '%u %s' ${r.outputs[0].path} && head -c 8 ${r.outputs[0].path} | od -An -tx1`);
    expect(seen.out).toContain(`1000 ${r.outputs[0].bytes}`);
    expect(seen.out.replace(/\s+/g, ' ').trim()).toContain('89 50 4e 47 0d 0a 1a 0a');
    expect(sandbox).toMatch(/^[0-9a-f]{64}$/);
    console.log(`[figures] first run (cold: create, start, exec, chart with matplotlib): ${first.ms} ms through ipc, ${r.duration_ms} ms in the sandbox`);
  }, 120_000);

  it('a second run is warm: the same sandbox container, and it sees files written after the first', async () => {
    await writeIn(runtime, agent, 'scripts/count.sh', 'wc -l < "$1"; ls /out | wc -l; echo "$OUT"\n');
    const second = await runProgram(runtime, agent, { program: 'scripts/count.sh', args: ['data/sales.csv'] });
    expect(second.result).toMatchObject({ exit_code: 0, stdout: '4\n0\n/out\n', outputs: [] });
    expect(programs.sandboxes.containerOf(session)).toBe(sandbox);
    const node = await runProgram(runtime, agent, { program: 'scripts/hello.mjs' });
    expect(node.result?.exit_code).not.toBe(0); // not written yet
    await writeIn(runtime, agent, 'scripts/hello.mjs', 'console.log(process.version.split(".")[0], process.argv.slice(2).join("+"))\n');
    const again = await runProgram(runtime, agent, { program: 'scripts/hello.mjs', args: ['a b', 'c'] });
    expect(again.result).toMatchObject({ exit_code: 0, stdout: 'v22 a b+c\n' });
    expect(programs.sandboxes.containerOf(session)).toBe(sandbox);
    console.log(`[figures] warm runs through ipc: sh ${second.ms} ms, node ${again.ms} ms`);
  }, 60_000);

  it('a program that fails answers with its exit code and stderr; its traceback is kept', async () => {
    await writeIn(runtime, agent, 'scripts/fail.py', 'import sys\nprint("x" * 200000, file=sys.stderr)\nraise SystemExit("the end is kept")\n');
    const r = (await runProgram(runtime, agent, { program: 'scripts/fail.py' })).result!;
    expect(r.exit_code).toBe(1);
    expect(r.stderr.length).toBeLessThan(70 * 1024);
    expect(r.stderr_cut_bytes).toBeGreaterThan(100_000);
    expect(r.stderr).toMatch(/bytes cut/);
    expect(r.stderr.trimEnd().endsWith('the end is kept')).toBe(true);
  }, 60_000);

  it('refuses what is not a program in the workspace, and an interpreter it cannot guess, before anything runs', async () => {
    for (const [args, field] of [[{ program: '../../etc/passwd', interpreter: 'sh' }, 'program'], [{ program: '/etc/passwd', interpreter: 'sh' }, 'program'], [{ program: 'notes.txt' }, 'interpreter']] as const) {
      const r = await runProgram(runtime, agent, args);
      expect(r.error).toMatchObject({ code: 'VALIDATION_FAILED', field });
    }
    const r = await runProgram(runtime, agent, { program: 'x.py', timeout_s: 301 });
    expect(r.error).toMatchObject({ code: 'VALIDATION_FAILED', field: 'timeout_s' });
  }, 60_000);

  it('is hardened like an agent or more (docker inspect)', async () => {
    const info = await runtime.inspect(sandbox);
    const host = info.HostConfig;
    expect(host.Runtime).toBe((await runtime.sandbox()).runtime);
    expect((await runtime.inspect(agent)).HostConfig.Runtime).toBe(host.Runtime);
    if (AGENT_RUNTIME !== 'auto') expect(host.Runtime).toBe(AGENT_RUNTIME);
    expect(host.NetworkMode).toBe('none');
    expect((info.Config as { NetworkDisabled?: boolean }).NetworkDisabled).toBe(true);
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.CapDrop).toEqual(['ALL']);
    expect(host.CapAdd ?? []).toEqual([]);
    expect(host.Privileged).toBe(false);
    expect(host.SecurityOpt).toEqual(['no-new-privileges']);
    expect([host.Memory, host.MemorySwap, host.NanoCpus]).toEqual([512 * 2 ** 20, 512 * 2 ** 20, 1e9]);
    expect(host.PidsLimit).toBe(host.Runtime === 'runsc' ? 64 + 128 * 12 : 128);
    expect(host.Tmpfs).toEqual({ '/tmp': 'rw,nosuid,nodev,size=64m,nr_inodes=16384,uid=1000,gid=1000,mode=0700' });
    expect(host.Init).toBe(true);
    expect(info.Config.User).toBe('65534:65534');
    expect(info.Config.Env ?? []).not.toEqual(expect.arrayContaining([expect.stringMatching(/KEY|TOKEN|SECRET|sk-ant/)]));
    expect(info.Config.Labels).toMatchObject({ 'carapace.managed': 'true', 'carapace.instance': instance, 'carapace.group': 'family', 'carapace.session': session, 'carapace.role': 'sandbox' });
    const mounts = Object.fromEntries(info.Mounts.map((m) => [m.Destination, { rw: m.RW, type: m.Type }]));
    expect(mounts).toEqual({ '/workspace': { rw: false, type: 'bind' }, '/out': { rw: true, type: 'volume' } });
    expect(info.Mounts.find((m) => m.Destination === '/workspace')?.Source).toBe(join(groupsDir, 'family'));
    const out = await runtime.docker.getVolume(info.Mounts.find((m) => m.Destination === '/out')!.Name!).inspect();
    expect(out.Options).toMatchObject({ type: 'tmpfs', o: expect.stringContaining('size=64m') });
    // A run is uid 1000, with nothing of the host's environment.
    await writeIn(runtime, agent, 'scripts/who.sh', 'id -u; id -g; env | sort | cut -d= -f1 | tr "\\n" " "\n');
    const who = (await runProgram(runtime, agent, { program: 'scripts/who.sh' })).result!;
    const [uid, gid, env] = who.stdout.split('\n');
    expect([uid, gid]).toEqual(['1000', '1000']);
    expect(env.trim().split(' ').filter((k) => !['HOME', 'HOSTNAME', 'LANG', 'MPLBACKEND', 'MPLCONFIGDIR', 'OUT', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE', 'SHLVL', 'NODE_VERSION', 'YARN_VERSION', 'NODE_EXTRA_CA_CERTS'].includes(k))).toEqual([]);
  }, 60_000);

  it('is a tool the agent learns from its skill and list_tools, allowed per group', async () => {
    const skill = await sh('cat /home/node/.claude/skills/carapace-core/SKILL.md');
    expect(skill.out).toMatch(/^description: .*Run programs/m);
    expect(skill.out).toContain(`ipc tool.invoke.run_program '{"program":"scripts/chart.py"}'`);
    expect(skill.out).toContain("plt.savefig('/out/chart.png')");
    const listed = JSON.parse((await sh(`ipc tool.invoke.list_tools '{}'`)).out) as { tools: { name: string }[] };
    expect(listed.tools.map((t) => t.name)).toContain('run_program');
    // A group whose tools do not list it: refused at stage 4; a session with no container: no sandbox.
    const kids = await stack.openSession('kids');
    expect((await stack.ipc(kids, 'tool.invoke.run_program', { program: 'a.py' })).err).toMatchObject({ code: 'UNAUTHORIZED', stage: 4 });
    expect((await stack.ipc(kids, 'tool.invoke.list_tools', {})).out.tools.map((t: { name: string }) => t.name)).not.toContain('run_program');
    await stack.core.closeSession(kids.id);
    const bare = await stack.openSession('family');
    expect((await stack.ipc(bare, 'tool.invoke.run_program', { program: 'a.py' })).err).toMatchObject({ code: 'SANDBOX_UNAVAILABLE' });
    await stack.core.closeSession(bare.id);
  }, 60_000);

  it('one run at a time per session: a second one meanwhile is refused with RUN_BUSY', async () => {
    await writeIn(runtime, agent, 'scripts/slow.sh', 'sleep 3; echo slept\n');
    const slow = runProgram(runtime, agent, { program: 'scripts/slow.sh' });
    await new Promise((r) => setTimeout(r, 1000));
    const busy = await runProgram(runtime, agent, { program: 'scripts/count.sh', args: ['data/sales.csv'] });
    expect(busy.error).toMatchObject({ code: 'RUN_BUSY', retriable: true });
    expect((await slow).result).toMatchObject({ exit_code: 0, stdout: 'slept\n' });
  }, 60_000);

  it('every run is in the audit log: program, arguments, outputs, duration, exit code, timed out', async () => {
    const entries = (await stack.auditEntries()).filter((e) => e.topic === 'tool.invoke.run_program' && e.stage === 'handler' && e.session === session);
    const chart = entries.find((e) => e.reason?.includes(first.result!.run_id))!;
    expect(chart.reason).toContain(`python3 scripts/chart.py data/sales.csv, exit 0 after ${first.result!.duration_ms} ms; 1 output: runs/${first.result!.run_id}/chart.png`);
    const detail = JSON.parse(chart.detail!);
    expect(detail).toMatchObject({ program: 'scripts/chart.py', program_bytes: Buffer.byteLength(CHART), program_sha256: expect.stringMatching(/^[0-9a-f]{64}$/), args_count: 1, exit_code: 0, timed_out: false, outputs: first.result!.outputs, sandbox: { cold: true } });
    expect(chart.correlation).toBeTruthy();
    expect(entries.length).toBeGreaterThanOrEqual(6);
  });
});

describe('end to end', () => {
  it('the real Claude Code writes a script, runs it with run_program and sends the chart to the web chat', async () => {
    await writeIn(runtime, agent, 'data/sales.csv', CSV);
    const quiet = standIn.policy;
    const e2e: Policy = (request) => {
      const done = toolResults(request);
      if (done.length === 0) return [{ type: 'tool_use', name: 'Write', input: { file_path: '/workspace/group/scripts/e2e.py', content: CHART } }];
      if (done.length === 1) return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.run_program '{"program":"scripts/e2e.py","args":["data/sales.csv"]}'` } }];
      const chart = /runs\/[0-9-]+[0-9a-f]{6}\/chart\.png/.exec(done[1])?.[0];
      if (done.length === 2 && chart) return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.send_webchat '{"recipient":"console","body":"your chart","file":"${chart}"}'` } }];
      return [{ type: 'text', text: 'sent' }];
    };
    standIn.policy = e2e;
    const before = standIn.requests.length;
    try {
      expect((await manager.enqueue('family', 'chart my sales and send it')).ok).toBe(true);
    } finally {
      standIn.policy = quiet;
    }
    const results = toolResults(standIn.requests.slice(before).filter((r) => r.path.startsWith('/v1/messages')).at(-1)!);
    expect(results[1]).toMatch(/"exit_code":0/);
    expect(results[1]).toContain('rows: 3 sum: 38');
    expect(results[2]).toMatch(/"delivered":true/);
    expect(results[2]).toMatch(/"name":"chart\.png","size":\d+,"type":"image\/png"/);

    // Where the person sees it: the console's web chat in Chromium shows the chart as an image.
    const TOKEN = 'sandbox-runs-console-token-0123456789';
    const admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
      console: { files, panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })) },
    });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      const base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
      await page.goto(`${base}/`);
      await logIn(page, TOKEN);
      await page.goto(`${base}/plugins/webchat/?group=family`);
      await page.waitForFunction(() => {
        const img = document.querySelector<HTMLImageElement>('.file img[alt="chart.png"]');
        return img !== null && img.complete && img.naturalWidth > 0;
      }, { timeout: 20_000 });
      const size = await page.$eval('.file img[alt="chart.png"]', (img) => [(img as HTMLImageElement).naturalWidth, (img as HTMLImageElement).naturalHeight]);
      // matplotlib's default figure: 640 × 480 pixels.
      expect(size).toEqual([640, 480]);
    } finally {
      await browser.close();
      await admin.close();
    }
  }, 180_000);
});

describe('the sandbox goes', () => {
  it('after idle_minutes without a run', async () => {
    const quick = wireRuns(stack, manager, runtime, instance, { idle_minutes: 0.05 }, false);
    try {
      const s = stack.core.sessions.get(session)!;
      const r = await quick.runs.run({ program: 'scripts/count.sh', args: ['data/sales.csv'] }, s, { correlation: 'idle-test', keepWaiting: () => undefined });
      expect(r).toMatchObject({ exit_code: 0 });
      const id = quick.sandboxes.containerOf(session)!;
      expect(await runtime.isRunning(id)).toBe(true);
      await eventually(async () => ((await runtime.inspect(id).catch(() => null)) === null ? true : undefined), 15_000);
      expect(quick.sandboxes.containerOf(session)).toBeNull();
    } finally {
      await quick.sandboxes.stop();
    }
  }, 60_000);

  it('is never made from a missing image: the run is refused, and says how to build it', async () => {
    const missing = wireRuns(stack, manager, runtime, instance, { image: 'carapace-sandbox:no-such-tag' }, false);
    try {
      const r = await missing.sandboxes.lease(session, 'family');
      expect(r).toMatchObject({ error: { code: 'SANDBOX_UNAVAILABLE', retriable: false, message: expect.stringContaining('make images') } });
      expect(missing.sandboxes.containerOf(session)).toBeNull();
    } finally {
      await missing.sandboxes.stop();
    }
  }, 60_000);

  it('when the session ends (agent teardown), with its /out volume', async () => {
    const sandbox = programs.sandboxes.containerOf(session)!;
    const volume = (await runtime.inspect(sandbox)).Mounts.find((m) => m.Destination === '/out')!.Name!;
    await manager.retire('family');
    await eventually(async () => ((await runtime.inspect(sandbox).catch(() => null)) === null ? true : undefined));
    await eventually(async () => ((await runtime.docker.getVolume(volume).inspect().catch(() => null)) === null ? true : undefined));
    expect(programs.sandboxes.containerOf(session)).toBeNull();
    const left = await runtime.docker.listContainers({ all: true, filters: { label: [`carapace.instance=${instance}`, 'carapace.role=sandbox'] } });
    expect(left).toEqual([]);
  }, 60_000);
});
