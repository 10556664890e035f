// run_program on a real Docker engine: a trivial run (`sh` of a one-line script, and
// `python3` of `pass`) through the real ipc binary, the core's pipeline and a real sandbox:
//   cold: the first run of a session (create + start + exec + /out read), a new session each
//   warm: later runs of the same session (exec into the warm sandbox + /out read)
// against a bare `docker run --rm <sandbox image> true` in the same run, under each runtime
// the engine offers (runc, and runsc when registered), with ratios; and the memory a warm
// sandbox holds (the engine's figure for its cgroup, from the stats API).
// BENCH_RUNS: runs of each kind (default 10); BENCH_SANDBOX_IMAGE: the image.
import { execFileSync } from 'node:child_process';
import { engineRuntimes, type Runtime } from './engine-runtimes.js';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DockerRuntime } from '../core/src/agents/docker-runtime.js';
import { BindStorage } from '../core/src/agents/storage.js';
import { parseConfig } from '../core/src/config.js';
import { sandboxRuns } from '../core/src/sandbox-runs/wiring.js';
import { Stack } from '../core/test/harness.js';
import { stats } from './stats.js';

const N = Math.max(10, Number(process.env.BENCH_RUNS ?? 10));
const IMAGE = process.env.BENCH_SANDBOX_IMAGE || 'carapace-sandbox:latest';

interface Result {
  bare: number[];
  cold: number[];
  warmSh: number[];
  warmPython: number[];
  /** Bytes the warm sandbox's cgroup holds (usage, and usage without page cache). */
  memory: { usage: number; withoutCache: number };
}

const p50 = (xs: number[]): number => stats(xs).p50;
const fmt = (xs: number[]): string => {
  const s = stats(xs);
  return `p50 ${s.p50.toFixed(0).padStart(5)} ms, p90 ${s.p90.toFixed(0).padStart(5)} ms, max ${s.max.toFixed(0).padStart(5)} ms (n=${s.n})`;
};
const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MB`;

async function measure(docker: string, runtime: Runtime): Promise<Result> {
  const bare: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    execFileSync(docker, ['run', '--rm', '--runtime', runtime, '--network', 'none', '--entrypoint', 'true', IMAGE]);
    bare.push(performance.now() - t);
  }
  const stack = await Stack.start({ plugins: [], config: { groups: { bench: {} }, rate_limit: { per_minute: 100_000, burst: 10_000 } } });
  const instance = `bench-runs-${process.pid}`;
  const engine = new DockerRuntime({ sandbox: runtime });
  const groupsDir = join(stack.dir, 'groups');
  mkdirSync(join(groupsDir, 'bench'), { recursive: true });
  for (const [name, text] of [['true.sh', ':\n'], ['pass.py', 'pass\n']]) writeFileSync(join(groupsDir, 'bench', name), text);
  if (process.getuid?.() === 0) chownSync(join(groupsDir, 'bench'), 1000, 1000);
  const programs = sandboxRuns({ runtime: engine, storage: new BindStorage({ groupsDir, instance }), audit: stack.core.audit, settings: parseConfig({ sandbox: { image: IMAGE, runtime } }).sandbox, instance });
  stack.core.acceptRuns(programs.runs, (session) => programs.sandboxes.end(session));
  /** A session as an agent's, minus the agent: a trivial run writes nothing back into it. */
  const session = async () => {
    const s = await stack.openSession('bench');
    stack.core.sessions.setContainer(s.id, 'no-agent-container');
    return s;
  };
  const run = async (s: Awaited<ReturnType<typeof session>>, program: string): Promise<number> => {
    const t = performance.now();
    const r = await stack.ipc(s, 'tool.invoke.run_program', { program }, { timeoutMs: 120_000 });
    const ms = performance.now() - t;
    if (r.code !== 0 || r.out?.exit_code !== 0) throw new Error(`run failed: ${r.stdout} ${r.stderr}`);
    return ms;
  };
  const result: Result = { bare, cold: [], warmSh: [], warmPython: [], memory: { usage: 0, withoutCache: 0 } };
  try {
    for (let i = 0; i < N; i++) {
      const s = await session();
      result.cold.push(await run(s, 'true.sh'));
      await stack.core.closeSession(s.id);
    }
    const s = await session();
    await run(s, 'true.sh');
    for (let i = 0; i < N; i++) result.warmSh.push(await run(s, 'true.sh'));
    for (let i = 0; i < N; i++) result.warmPython.push(await run(s, 'pass.py'));
    // After its runs' sweeps: what a warm sandbox holds while it waits for the next.
    await new Promise((r) => setTimeout(r, 2000));
    const id = programs.sandboxes.containerOf(s.id)!;
    const st = (await engine.docker.getContainer(id).stats({ stream: false })) as { memory_stats: { usage?: number; stats?: { cache?: number; inactive_file?: number } } };
    const usage = st.memory_stats.usage ?? 0;
    result.memory = { usage, withoutCache: usage - (st.memory_stats.stats?.cache ?? st.memory_stats.stats?.inactive_file ?? 0) };
  } finally {
    await programs.sandboxes.stop();
    await stack.stop();
  }
  return result;
}

async function main(): Promise<void> {
  const docker = process.env.DOCKER || 'docker';
  const runtimes = engineRuntimes(docker);
  const results = new Map<Runtime, Result>();
  for (const runtime of runtimes) results.set(runtime, await measure(docker, runtime));
  const runc = results.get('runc')!;
  const vsRunc = (r: Result, pick: (r: Result) => number[]): string => (r === runc ? '' : `   ×${(p50(pick(r)) / p50(pick(runc))).toFixed(2)} runc`);
  for (const [runtime, r] of results) {
    console.log(`run_program under ${runtime} (through ipc and the pipeline; ${IMAGE})`);
    console.log(`  bare docker run --rm … true (baseline)   ${fmt(r.bare)}${vsRunc(r, (x) => x.bare)}`);
    console.log(`  cold: first run of a session (sh)        ${fmt(r.cold)}   ratio to bare ${(p50(r.cold) / p50(r.bare)).toFixed(2)}, target ≤ 1${vsRunc(r, (x) => x.cold)}`);
    console.log(`  warm: a later run (sh of ':')            ${fmt(r.warmSh)}   target ≤ 100 ms${vsRunc(r, (x) => x.warmSh)}`);
    console.log(`  warm: a later run (python3 of 'pass')    ${fmt(r.warmPython)}${vsRunc(r, (x) => x.warmPython)}`);
    console.log(`  a warm sandbox holds                     ${mb(r.memory.usage)} (${mb(r.memory.withoutCache)} without page cache)`);
  }
  console.log(
    JSON.stringify({
      bench: 'sandbox-runs',
      image: IMAGE,
      runtimes: Object.fromEntries(
        [...results].map(([runtime, r]) => [
          runtime,
          { bare_p50_ms: p50(r.bare), cold_p50_ms: p50(r.cold), cold_to_bare: p50(r.cold) / p50(r.bare), warm_sh_p50_ms: p50(r.warmSh), warm_python_p50_ms: p50(r.warmPython), memory_bytes: r.memory.usage, memory_without_cache_bytes: r.memory.withoutCache },
        ]),
      ),
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
