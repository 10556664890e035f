// Attacks from a run: code the agent runs with run_program (from inside a real agent
// container as uid 1000, through the real pipeline) tries to get out of its sandbox or to
// harm the appliance. Each is refused or contained, and meanwhile a tool call through the
// pipeline still answers. Under gVisor by default; `make test` runs it again under runc.
// The figures (time to contain, sizes) are printed for the README. Needs `make images`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, release } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Session } from '../../src/boundary/session-table.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import type { SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import { sleep, Stack } from '../harness.js';
import { newAgentManager, sh as shIn, testRuntime } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { runProgram, wireRuns, writeIn, type RunResult } from '../support/sandbox-runs.js';

let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let programs: SandboxRuns;
let agent: string;
let session: string;
let probe: Session;
let groupsDir: string;
let runsc: boolean;
let server: Server;
let port: number;
let connections = 0;
const instance = `attacks-${process.pid}`;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {}, other: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  runsc = (await runtime.sandbox()).runtime === 'runsc';
  groupsDir = join(stack.dir, 'groups');
  mkdirSync(join(groupsDir, 'other'), { recursive: true });
  writeFileSync(join(groupsDir, 'other', 'other-secret.txt'), 'belongs to other');
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-0000', agents: { run_timeout_ms: 60_000 }, instance, runtime, groups: ['family', 'other'] });
  await manager.removeOrphans();
  programs = wireRuns(stack, manager, runtime, instance);
  await manager.enqueue('family', 'warm up').catch(() => undefined);
  ({ container: agent, session } = manager.live('family')!);
  probe = await stack.openSession('family');
  // A port on every address of the host, as the appliance's published ones are.
  server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  port = (server.address() as { port: number }).port;
}, 180_000);

afterAll(async () => {
  server?.close();
  await manager?.stop();
  await programs?.sandboxes.stop();
  await standIn?.stop();
  await stack?.stop();
});

/** A tool call through the whole pipeline, from another session of the group. */
async function pipelineAnswers(): Promise<boolean> {
  const r = await stack.ipc(probe, 'tool.invoke.echo', { text: 'still here' });
  return r.code === 0 && r.out?.echoed?.text === 'still here';
}

/** Runs `code` as attacks/<file> from inside the agent's container; the pipeline must answer during and after. */
async function attack(file: string, code: string, args: Record<string, unknown> = {}): Promise<RunResult & { ms: number }> {
  await writeIn(runtime, agent, `attacks/${file}`, code);
  const started = performance.now();
  const run = runProgram(runtime, agent, { program: `attacks/${file}`, ...args });
  await sleep(400);
  const during = await pipelineAnswers();
  const r = await run;
  const ms = Math.round(performance.now() - started);
  expect(r.error).toBeNull();
  expect(during).toBe(true);
  expect(await pipelineAnswers()).toBe(true);
  return { ...r.result!, ms };
}

/** What the agent's workspace holds, in KB (du, in the agent's own container). */
async function workspaceKb(): Promise<number> {
  return Number((await shIn(runtime, agent, 'du -sk /workspace/group | cut -f1')).out.trim());
}

/** The next run works (in a new sandbox if the attack cost its own). */
async function nextRunWorks(): Promise<void> {
  await writeIn(runtime, agent, 'attacks/ok.sh', 'echo fine\n');
  expect((await runProgram(runtime, agent, { program: 'attacks/ok.sh' })).result).toMatchObject({ exit_code: 0, stdout: 'fine\n' });
}

/** Processes in the sandbox now, counted with shell builtins (the counting shell is one of them). */
async function processesIn(id: string): Promise<number> {
  const exec = await runtime.docker.getContainer(id).exec({ Cmd: ['sh', '-c', 'n=0; for d in /proc/[0-9]*; do n=$((n+1)); done; echo $n'], User: '1000:1000', AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const out = new PassThrough();
  let text = '';
  out.on('data', (c: Buffer) => (text += c.toString()));
  runtime.docker.modem.demuxStream(stream, out, new PassThrough());
  await new Promise((resolve) => stream.on('end', resolve));
  return Number(text.trim());
}

const figures: string[] = [];
afterAll(() => console.log(`[figures] sandbox attacks under ${runsc ? 'runsc' : 'runc'}:\n${figures.join('\n')}`));

describe('what a run cannot reach', () => {
  it('the network: no route to 1.1.1.1:53 or to the host\'s ports, no DNS, no interface but loopback', async () => {
    const gateways = Object.values(networkInterfaces()).flat().filter((a) => a && a.family === 'IPv4').map((a) => a!.address);
    const r = await attack('net.py', `import json, socket, sys
res = {}
targets = [("1.1.1.1", 53)] + [(h, ${port}) for h in sys.argv[1:]]
for host, port in targets:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); res[f"{host}:{port}"] = "connected"
    except OSError as e:
        res[f"{host}:{port}"] = type(e).__name__
try:
    socket.getaddrinfo("example.com", 80); res["dns"] = "resolved"
except OSError as e:
    res["dns"] = type(e).__name__
res["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print(json.dumps(res))
`, { args: gateways });
    const res = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(Object.entries(res).filter(([, v]) => v === 'connected' || v === 'resolved')).toEqual([]);
    expect(res.interfaces).toEqual(['lo']);
    expect(connections).toBe(0);
    figures.push(`network: ${Object.keys(res).length - 1} connections and a DNS lookup refused in ${r.duration_ms} ms`);
  }, 60_000);

  it("another group's workspace, the session socket, the Docker socket: not there", async () => {
    const r = await attack('look.sh', `find / -name other-secret.txt 2>/dev/null
echo "--"; find / \\( -type s -o -name '*.sock' \\) -not -path '/proc/*' 2>/dev/null
echo "--"; ls -A /run /var/run 2>&1; ls /workspace | tr '\\n' ' '
echo "--"; grep -c ' /workspace' /proc/mounts
`);
    const [found, sockets, runs, mounts] = r.stdout.split('--\n');
    expect(found.trim()).toBe('');
    expect(sockets.trim()).toBe('');
    expect(runs).not.toMatch(/carapace|docker\.sock|llm/);
    expect(runs).toContain('attacks');
    expect(mounts.trim()).toBe('1');
  }, 60_000);

  it('cannot write the workspace (read-only) or the root', async () => {
    const r = await attack('write.sh', 'touch /workspace/pwned 2>&1; mkdir /workspace/attacks/x 2>&1; touch /usr/local/bin/pwned 2>&1; echo done\n');
    const [workspace, folder, root] = r.stdout.split('\n');
    expect(workspace).toMatch(/pwned': Read-only file system$/);
    expect(folder).toMatch(/x’: Read-only file system$/);
    // gVisor checks the permission before the mount: either way nothing is written.
    expect(root).toMatch(/pwned': (Read-only file system|Permission denied)$/);
    expect(existsSync(join(groupsDir, 'family', 'pwned'))).toBe(false);
    expect(existsSync(join(groupsDir, 'family', 'attacks', 'x'))).toBe(false);
  }, 60_000);

  it("sees its own /proc and /sys, not the host's: a handful of processes, none of the host's", async () => {
    const r = await attack('proc.sh', 'for d in /proc/[0-9]*; do echo "${d#/proc/}"; done | tr "\\n" " "; echo; cat /proc/[0-9]*/cmdline | tr "\\0" " "; echo; echo "--"; uname -r; ls /sys/class/net 2>&1 | tr "\\n" " "\n');
    const [procs, rest] = r.stdout.split('--\n');
    const [pids, cmdlines] = procs.split('\n');
    // docker-init, its sleep, and the run: wrapper, sh, and what it runs now.
    expect(pids.trim().split(' ').length).toBeLessThan(10);
    expect(cmdlines).not.toMatch(/dockerd|containerd|jest|plugin-host|claude/);
    expect(cmdlines).toContain('sleep infinity');
    const kernel = rest.split('\n')[0];
    if (runsc) expect(kernel).not.toBe(release());
    expect(rest).not.toMatch(/eth0|docker0/);
  }, 60_000);
});

describe('what a run cannot do to the appliance', () => {
  it('a fork bomb meets the process limit; the next run works', async () => {
    const r = await attack('bomb.sh', 'f() { f | f & }; f; sleep 4; echo survived\n', { timeout_s: 10 });
    // Within its timeout: under gVisor the sandbox stops at the limit, and the core notices within a second.
    expect(r.duration_ms).toBeLessThan(10_000);
    if (runsc) expect(['sandbox_stopped', null]).toContain(r.killed);
    figures.push(`fork bomb: contained in ${r.duration_ms} ms (${r.killed ?? `exit ${r.exit_code}`})`);
    await nextRunWorks();
  }, 60_000);

  it('a memory bomb is killed at 512 MB and the run says so; the next run works', async () => {
    const r = await attack('memory.py', 'chunks = []\nwhile True:\n    chunks.append(b"x" * (32 * 1024 * 1024))\n', { timeout_s: 30 });
    expect(r.timed_out).toBe(false);
    // Under gVisor the limit stops the whole sandbox, or gVisor's own OOM kills the program
    // (137), or Python gets no more memory (MemoryError): each one a CI run has seen.
    // What the run answered goes into the failure: a CI run once saw none of the three.
    if (runsc) expect({ contained: r.killed === 'sandbox_stopped' || r.exit_code === 137 || /MemoryError/.test(r.stderr), r }).toMatchObject({ contained: true });
    else expect([r.exit_code, r.note]).toEqual([137, expect.stringContaining('memory limit (512 MB)')]);
    figures.push(`memory bomb: killed in ${r.duration_ms} ms (${r.killed ?? `exit ${r.exit_code}`})`);
    await nextRunWorks();
  }, 60_000);

  it('filling the disk stops at /out and /tmp (64 MB each): nothing outside grows, the big file does not come back', async () => {
    const workspaceBefore = await workspaceKb();
    const r = await attack('fill.sh', 'dd if=/dev/zero of=/out/big bs=1M count=200 2>&1 | head -1; dd if=/dev/zero of=/tmp/big bs=1M count=200 2>&1 | head -1; rm /tmp/big\n');
    expect(r.stdout.match(/No space left on device/g)?.length).toBe(2);
    expect(r.refused_outputs).toEqual([{ name: 'big', reason: 'would pass 32 MB in all' }]);
    expect(r.outputs).toEqual([]);
    // Outside /out and /tmp: the sandbox's own layer (its root is read-only) and the workspace
    // (mounted read-only) hold what they held. Not the host disk's free space: other work moves it.
    const id = programs.sandboxes.containerOf(session);
    const [layer] = id ? ((await runtime.docker.listContainers({ all: true, size: true, filters: { id: [id] } })) as { SizeRw?: number }[]) : [];
    if (id) expect(layer?.SizeRw ?? 0).toBeLessThan(2 ** 20);
    // The script itself was written in between: a few KB, not the 200 MB the run tried.
    expect((await workspaceKb()) - workspaceBefore).toBeLessThan(1024);
    figures.push(`disk fill: /out and /tmp full at 64 MB each in ${r.duration_ms} ms; nothing written outside`);
  }, 60_000);

  it('links and special files in /out are refused and never followed; only the regular file comes back', async () => {
    const r = await attack('links.sh', 'ln -s /etc/passwd /out/passwd; ln -s /workspace/../../.. /out/up; mkfifo /out/fifo; echo data > /out/real.txt; ln /out/real.txt /out/hard.txt\n');
    expect(r.outputs.length).toBe(1);
    const kept = join(groupsDir, 'family', r.outputs[0].path);
    expect(lstatSync(kept).isFile()).toBe(true);
    const refused = Object.fromEntries(r.refused_outputs.map((o) => [o.name, o.reason]));
    expect(refused.passwd).toBe('a symlink to /etc/passwd: only regular files come back (never followed)');
    expect(refused.up).toMatch(/^a symlink/);
    // A fifo gVisor made on a volume stays inside the sandbox (the engine never sees it); under runc the engine does, and it is refused.
    if (!runsc) expect(refused.fifo).toMatch(/^a fifo/);
    expect(Object.keys(refused).filter((n) => n === 'real.txt' || n === 'hard.txt')).toHaveLength(1);
    const written = readdirSync(join(groupsDir, 'family', 'runs', r.run_id));
    expect(written).toHaveLength(1);
  }, 60_000);

  it('a runs/ link the agent planted sends no file outside the workspace', async () => {
    await shIn(runtime, agent, 'mv runs runs.before && ln -s /usr/local/bin runs');
    try {
      const r = await attack('planted.sh', 'echo x > /out/ipc\n');
      const bin = await shIn(runtime, agent, 'ls /usr/local/bin');
      expect(bin.out.split('\n')).not.toContain(r.run_id);
      const landed = r.outputs.length === 1 ? lstatSync(join(groupsDir, 'family', r.outputs[0].path)).isFile() : r.refused_outputs[0].reason.startsWith('could not be written into the workspace');
      expect(landed).toBe(true);
    } finally {
      await shIn(runtime, agent, 'rm -rf runs; mv runs.before runs');
    }
  }, 60_000);

  it('ten thousand files in /out: the first 50 come back, the rest are refused, in bounded time', async () => {
    const r = await attack('many.py', 'for i in range(10000):\n    open(f"/out/f{i:05}.txt", "w").write(str(i))\n');
    expect(r.outputs).toHaveLength(50);
    expect(r.refused_count).toBeGreaterThanOrEqual(1950);
    expect(r.refused_outputs).toHaveLength(20);
    expect(r.ms).toBeLessThan(60_000);
    figures.push(`10,000 output files: 50 back, ${r.refused_count} refused, ${r.ms} ms through ipc (run ${r.duration_ms} ms)`);
  }, 90_000);

  it('a gigabyte on stdout: cut to 64 KB, the run killed early, the core\'s memory bounded', async () => {
    const rss = process.memoryUsage().rss;
    const r = await attack('flood.sh', "head -c 1000000000 /dev/zero | tr '\\0' a; echo end\n", { timeout_s: 120 });
    const grew = process.memoryUsage().rss - rss;
    expect(r.killed).toBe('output_limit');
    expect(r.stdout.length).toBeLessThan(64 * 1024 + 100);
    expect(r.stdout_cut_bytes).toBeGreaterThan(0);
    expect(r.duration_ms).toBeLessThan(20_000);
    expect(grew).toBeLessThan(100 * 2 ** 20);
    figures.push(`1 GB on stdout: killed after ${r.stdout_cut_bytes + 64 * 1024} bytes in ${r.duration_ms} ms; the core's RSS grew ${Math.round(grew / 2 ** 20)} MB`);
    await nextRunWorks();
  }, 90_000);
});

describe('wall time', () => {
  it('a run that never ends is killed at its timeout; the next run works in the same sandbox', async () => {
    const id = programs.sandboxes.containerOf(session);
    const r = await attack('forever.sh', 'while :; do :; done\n', { timeout_s: 2 });
    expect(r).toMatchObject({ timed_out: true, killed: 'timeout', exit_code: 137 });
    expect(r.duration_ms).toBeGreaterThanOrEqual(2000);
    expect(r.duration_ms).toBeLessThan(4000);
    figures.push(`endless loop, timeout_s 2: killed after ${r.duration_ms} ms`);
    await nextRunWorks();
    expect(programs.sandboxes.containerOf(session)).toBe(id);
  }, 60_000);

  it('what a run leaves behind dies with it, even detached from its timeout', async () => {
    const r = await attack('detach.sh', 'setsid sh -c "exec >/dev/null 2>&1; sleep 1000" & echo started\n');
    expect(r.exit_code).toBe(0);
    expect(await processesIn(programs.sandboxes.containerOf(session)!)).toBe(3);
  }, 60_000);

  it.each([
    ['closes its output', 'kill -9 -1; exec >/dev/null 2>&1; sleep 1000\n'],
    ['keeps its output open', 'kill -9 -1; sleep 1000\n'],
  ])('a run that kills its own wrapper and %s: what is left is swept a second after the run', async (how, code) => {
    const r = await attack(`orphan-${how.split(' ')[0]}.sh`, code, { timeout_s: 30 });
    // The engine ends an exec whose process died within ~2 s, whoever holds its output.
    expect(r.duration_ms).toBeLessThan(5000);
    await sleep(2500);
    expect(await processesIn(programs.sandboxes.containerOf(session)!)).toBe(3);
    figures.push(`a run that killed its wrapper and ${how}: answered after ${r.duration_ms} ms, its leftovers swept ~1 s later`);
  }, 60_000);

  it('a run that stops its wrapper (which would kill it) is killed at its timeout all the same, wrapper and all; the sandbox stays', async () => {
    const id = programs.sandboxes.containerOf(session);
    const r = await attack('holdout.sh', 'kill -STOP $PPID; sleep 1000\n', { timeout_s: 2 });
    expect(r).toMatchObject({ timed_out: true, killed: 'timeout', exit_code: 137 });
    expect(r.duration_ms).toBeGreaterThanOrEqual(2000);
    expect(r.duration_ms).toBeLessThan(5000);
    figures.push(`a run that stopped its wrapper (timeout_s 2): killed after ${r.duration_ms} ms`);
    expect(await processesIn(id!)).toBe(3);
    await nextRunWorks();
    expect(programs.sandboxes.containerOf(session)).toBe(id);
  }, 60_000);
});
