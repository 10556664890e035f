// Agent start-up on a real Docker engine, model time excluded (the model is a local
// stand-in that answers at once):
//   cold: event → container running → first ipc call served, split into its parts:
//         the container start, Claude Code's start (until its first model request), and
//         the answer → Bash tool → ipc served
//   warm: event for a group whose container is warm → Claude Code's first model request
// Baseline in the same run: a bare `docker run` of the agent image.
// BENCH_IMAGE picks the image (default carapace-agent:latest).
import { execFileSync } from 'node:child_process';
import { DockerRuntime } from '../core/src/agents/docker-runtime.js';
import type { AgentSpec, AttachedAgent } from '../core/src/agents/runtime.js';
import { Stack } from '../core/test/harness.js';
import { newAgentManager } from '../core/test/support/agents.js';
import { AnthropicStandIn, hasTool, toolResults } from '../core/test/support/anthropic-standin.js';
import { stats } from './stats.js';

const COLD = Number(process.env.BENCH_COLD ?? 5);
const WARM = Number(process.env.BENCH_WARM ?? 10);
const IMAGE = process.env.BENCH_IMAGE || 'carapace-agent:latest';

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

async function main(): Promise<void> {
  const docker = process.env.DOCKER || 'docker';
  const bare: number[] = [];
  for (let i = 0; i < COLD; i++) {
    const t = performance.now();
    execFileSync(docker, ['run', '--rm', '--network', 'none', '--entrypoint', 'true', IMAGE]);
    bare.push(performance.now() - t);
  }

  let firstModelRequest = 0;
  const model = new AnthropicStandIn((request) => {
    if (!firstModelRequest) firstModelRequest = performance.now();
    if (hasTool(request, 'Bash') && toolResults(request).length === 0) return [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.get_session_info '{}'` } }];
    return [{ type: 'text', text: 'done' }];
  });
  const upstream = await model.start();
  const stack = await Stack.start({ plugins: ['echo'], config: { groups: { bench: {} } } });
  const runtime = new TimedRuntime();
  const manager = newAgentManager(stack, {
    upstream,
    apiKey: 'sk-ant-bench-key-000000000000',
    agents: { image: IMAGE, run_timeout_ms: 120_000 },
    instance: `bench-${process.pid}`,
    runtime,
    groups: ['bench'],
  });
  /** When the session's first ipc call was answered, on the performance.now() clock (the audit log has ms). */
  const firstIpc = (session: string): number => {
    const entry = stack.core.audit.query({ session, topic: 'tool.invoke.get_session_info' }).find((e) => e.stage === 'response');
    return entry ? Date.parse(entry.timestamp) - performance.timeOrigin : NaN;
  };

  const parts = { running: [] as number[], claude: [] as number[], tool: [] as number[], total: [] as number[] };
  const warm: number[] = [];
  try {
    for (let i = 0; i < COLD; i++) {
      firstModelRequest = 0;
      const t = performance.now();
      await manager.enqueue('bench', 'cold start');
      const ipc = firstIpc(manager.live('bench')!.session);
      parts.running.push(runtime.started - t);
      parts.claude.push(firstModelRequest - runtime.started);
      parts.tool.push(ipc - firstModelRequest);
      parts.total.push(ipc - t);
      await manager.retire('bench');
    }
    await manager.enqueue('bench', 'warm up');
    for (let i = 0; i < WARM; i++) {
      firstModelRequest = 0;
      const t = performance.now();
      await manager.enqueue('bench', 'warm');
      warm.push(firstModelRequest - t);
    }
  } finally {
    await manager.stop();
    await stack.stop();
    await model.stop();
  }

  console.log(`Agent start-up (model time excluded: local stand-in; ${IMAGE})`);
  console.log(`  bare docker run (baseline)                      ${fmt(bare)}`);
  console.log(`  cold: event → container running                 ${fmt(parts.running)}   ratio to bare ${(p50(parts.running) / p50(bare)).toFixed(2)}`);
  console.log(`  cold:   running → Claude Code's first request   ${fmt(parts.claude)}`);
  console.log(`  cold:   model answer → Bash → ipc served        ${fmt(parts.tool)}`);
  console.log(`  cold: event → first ipc served                  ${fmt(parts.total)}   target ≤ 500 ms`);
  console.log(`  warm: event → agent running                     ${fmt(warm)}   target ≤ 100 ms`);
  console.log(
    JSON.stringify({
      bench: 'agent-start',
      image: IMAGE,
      bare_p50_ms: p50(bare),
      cold_running_p50_ms: p50(parts.running),
      cold_claude_start_p50_ms: p50(parts.claude),
      cold_tool_p50_ms: p50(parts.tool),
      cold_first_ipc_p50_ms: p50(parts.total),
      warm_p50_ms: p50(warm),
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
