// Agent start-up on a real Docker engine, model time excluded (the model is a local
// stand-in that answers at once):
//   cold: event → container running → first ipc call served, split into its parts:
//         the container start, Claude Code's start (until its first model request), and
//         the answer → Bash tool → ipc served
//   warm: event for a group whose container is warm → Claude Code's first model request
//   ipc in the agent's container: p50/p99 of `ipc` against `true` in the same shell loop
// Under each runtime the engine offers (runc, and runsc when registered), in the same run,
// with runsc's cost as a ratio to runc's. Baseline: a bare `docker run` of the agent image.
// BENCH_IMAGE picks the image (default carapace-agent:latest).
import { execFileSync } from 'node:child_process';
import { engineRuntimes, type Runtime } from './engine-runtimes.js';
import { DockerRuntime } from '../core/src/agents/docker-runtime.js';
import type { AgentSpec, AttachedAgent } from '../core/src/agents/runtime.js';
import { Stack } from '../core/test/harness.js';
import { newAgentManager } from '../core/test/support/agents.js';
import { AnthropicStandIn, hasTool, toolResults } from '../core/test/support/anthropic-standin.js';
import { stats } from './stats.js';

const COLD = Number(process.env.BENCH_COLD ?? 5);
const WARM = Number(process.env.BENCH_WARM ?? 10);
const IMAGE = process.env.BENCH_IMAGE || 'carapace-agent:latest';
const IPC_CALLS = Number(process.env.BENCH_IPC_CALLS ?? 200);

/** Notes when the container is running: startAttached resolves once the engine started it. */
class TimedRuntime extends DockerRuntime {
  started = 0;
  override async startAttached(spec: AgentSpec): Promise<AttachedAgent> {
    const agent = await super.startAttached(spec);
    this.started = performance.now();
    return agent;
  }
}

const p50 = (xs: number[]): number => stats(xs).p50;
const fmt = (xs: number[]): string => {
  const s = stats(xs);
  return `p50 ${s.p50.toFixed(0).padStart(4)} ms, max ${s.max.toFixed(0).padStart(4)} ms (n=${s.n})`;
};


interface Result {
  bare: number[];
  running: number[];
  claude: number[];
  tool: number[];
  total: number[];
  warm: number[];
  ipc: number[];
  trueBaseline: number[];
}

/** `ipc` and `true`, each timed by the shell inside the container (ns → ms), alternating. */
async function ipcInContainer(runtime: DockerRuntime, container: string): Promise<{ ipc: number[]; trueBaseline: number[] }> {
  const script = `i=0; while [ $i -lt ${IPC_CALLS} ]; do
    s=$(date +%s%N); ipc tool.invoke.get_session_info '{}' >/dev/null; e=$(date +%s%N); echo "ipc $((e-s))"
    s=$(date +%s%N); true; e=$(date +%s%N); echo "true $((e-s))"
    i=$((i+1)); done`;
  const r = await runtime.exec(container, ['sh', '-c', script], 300_000);
  const of = (name: string): number[] => r.stdout.split('\n').filter((l) => l.startsWith(`${name} `)).map((l) => Number(l.split(' ')[1]) / 1e6);
  return { ipc: of('ipc'), trueBaseline: of('true') };
}

async function measure(docker: string, sandbox: Runtime): Promise<Result> {
  const bare: number[] = [];
  for (let i = 0; i < COLD; i++) {
    const t = performance.now();
    execFileSync(docker, ['run', '--rm', '--runtime', sandbox, '--network', 'none', '--entrypoint', 'true', IMAGE]);
    bare.push(performance.now() - t);
  }

  let firstModelRequest = 0;
  const model = new AnthropicStandIn((request) => {
    if (!firstModelRequest) firstModelRequest = performance.now();
    if (hasTool(request, 'Bash') && toolResults(request).length === 0) return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.get_session_info '{}'` } }];
    return [{ type: 'text', text: 'done' }];
  });
  const upstream = await model.start();
  // A rate limit the in-container ipc loop stays under: it measures calls, not refusals.
  const stack = await Stack.start({ plugins: ['echo'], config: { groups: { bench: {} }, rate_limit: { per_minute: 100_000, burst: 10_000 } } });
  const runtime = new TimedRuntime({ sandbox, image: IMAGE });
  const manager = newAgentManager(stack, {
    upstream,
    apiKey: 'sk-ant-bench-key-000000000000',
    agents: { image: IMAGE, run_timeout_ms: 120_000, runtime: sandbox },
    instance: `bench-${process.pid}`,
    runtime,
    groups: ['bench'],
  });
  /** When the session's first ipc call was answered, on the performance.now() clock (the audit log has ms). */
  const firstIpc = (session: string): number => {
    const entry = stack.core.audit.query({ session, topic: 'tool.invoke.get_session_info' }).find((e) => e.stage === 'response');
    return entry ? Date.parse(entry.timestamp) - performance.timeOrigin : NaN;
  };

  const result: Result = { bare, running: [], claude: [], tool: [], total: [], warm: [], ipc: [], trueBaseline: [] };
  try {
    for (let i = 0; i < COLD; i++) {
      firstModelRequest = 0;
      const t = performance.now();
      await manager.enqueue('bench', 'cold start');
      const ipc = firstIpc(manager.live('bench')!.session);
      result.running.push(runtime.started - t);
      result.claude.push(firstModelRequest - runtime.started);
      result.tool.push(ipc - firstModelRequest);
      result.total.push(ipc - t);
      await manager.retire('bench');
    }
    await manager.enqueue('bench', 'warm up');
    for (let i = 0; i < WARM; i++) {
      firstModelRequest = 0;
      const t = performance.now();
      await manager.enqueue('bench', 'warm');
      result.warm.push(firstModelRequest - t);
    }
    const { ipc, trueBaseline } = await ipcInContainer(runtime, manager.live('bench')!.container);
    Object.assign(result, { ipc, trueBaseline });
  } finally {
    await manager.stop();
    await stack.stop();
    await model.stop();
  }
  return result;
}

async function main(): Promise<void> {
  const docker = process.env.DOCKER || 'docker';
  const runtimes = engineRuntimes(docker);
  const results = new Map<Runtime, Result>();
  for (const sandbox of runtimes) results.set(sandbox, await measure(docker, sandbox));
  const runc = results.get('runc')!;
  const ratio = (r: Result, pick: (r: Result) => number[]): string => (r === runc ? '' : `   ×${(p50(pick(r)) / p50(pick(runc))).toFixed(2)} runc`);
  const q = (xs: number[], at: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(at * xs.length))];
  for (const [sandbox, r] of results) {
    console.log(`Agent start-up under ${sandbox} (model time excluded: local stand-in; ${IMAGE})`);
    console.log(`  bare docker run (baseline)                      ${fmt(r.bare)}${ratio(r, (x) => x.bare)}`);
    console.log(`  cold: event → container running                 ${fmt(r.running)}   ratio to bare ${(p50(r.running) / p50(r.bare)).toFixed(2)}${ratio(r, (x) => x.running)}`);
    console.log(`  cold:   running → Claude Code's first request   ${fmt(r.claude)}${ratio(r, (x) => x.claude)}`);
    console.log(`  cold:   model answer → Bash → ipc served        ${fmt(r.tool)}${ratio(r, (x) => x.tool)}`);
    console.log(`  cold: event → first ipc served                  ${fmt(r.total)}${ratio(r, (x) => x.total)}`);
    console.log(`  warm: event → agent running                     ${fmt(r.warm)}   target ≤ 100 ms${ratio(r, (x) => x.warm)}`);
    console.log(`  ipc in the container: p50 ${q(r.ipc, 0.5).toFixed(2)} ms, p99 ${q(r.ipc, 0.99).toFixed(2)} ms; \`true\` p50 ${q(r.trueBaseline, 0.5).toFixed(2)} ms (n=${r.ipc.length})${ratio(r, (x) => x.ipc)}`);
  }
  console.log(
    JSON.stringify({
      bench: 'agent-start',
      image: IMAGE,
      runtimes: Object.fromEntries(
        [...results].map(([sandbox, r]) => [
          sandbox,
          {
            bare_p50_ms: p50(r.bare),
            cold_running_p50_ms: p50(r.running),
            cold_claude_start_p50_ms: p50(r.claude),
            cold_tool_p50_ms: p50(r.tool),
            cold_first_ipc_p50_ms: p50(r.total),
            warm_p50_ms: p50(r.warm),
            ipc_p50_ms: q(r.ipc, 0.5),
            ipc_p99_ms: q(r.ipc, 0.99),
            true_p50_ms: q(r.trueBaseline, 0.5),
          },
        ]),
      ),
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
