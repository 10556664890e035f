// Sandbox runs (run_program) as the docker tests and the benchmark wire them: the stack's
// core, an agent manager's workspaces, the Docker runtime the agents use. No Jest here: the
// benchmark imports this outside Jest.
import type { RunAnswer } from '../../src/sandbox-runs/run-audit.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { parseConfig } from '../../src/config.js';
import { sandboxRuns, type SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import type { Stack } from '../harness.js';
import { sh } from './agents.js';

/** The sandbox image the docker tests run (make images SANDBOX_IMAGE=... builds another tag). */
export const SANDBOX_IMAGE = process.env.CARAPACE_SANDBOX_IMAGE || 'carapace-sandbox:latest';

/**
 * run_program for the stack's core (unless `accept` is false: runs called directly),
 * sandboxes labelled like the manager's agents (`instance`).
 */
export function wireRuns(stack: Stack, manager: AgentManager, runtime: DockerRuntime, instance: string, sandbox: Record<string, unknown> = {}, accept = true): SandboxRuns {
  const programs = sandboxRuns({ runtime, storage: manager.storage, audit: stack.core.audit, settings: parseConfig({ sandbox: { image: SANDBOX_IMAGE, ...sandbox } }).sandbox, instance });
  if (accept) stack.core.acceptRuns(programs.runs, (session) => programs.sandboxes.end(session));
  return programs;
}

/** What run_program answers (the core's own type). */
export type RunResult = RunAnswer;

/**
 * run_program called as the agent does it: the real `ipc` inside its container, as uid
 * 1000. The arguments travel in a file of the workspace (no shell quoting of programs).
 */
export function runProgram(runtime: DockerRuntime, container: string, args: Record<string, unknown>): Promise<ToolCall<RunResult>> {
  return invokeTool<RunResult>(runtime, container, 'run_program', args);
}

export interface ToolCall<T> {
  code: number | null;
  result: T | null;
  error: { code: string; message: string; field?: string } | null;
  ms: number;
}

/** Any tool called as the agent does it (run_skill, list_skills: support/skills.ts). */
export async function invokeTool<T>(runtime: DockerRuntime, container: string, tool: string, args: Record<string, unknown>): Promise<ToolCall<T>> {
  const name = `.run-args-${Math.random().toString(36).slice(2)}.json`;
  await writeIn(runtime, container, name, JSON.stringify(args));
  const started = performance.now();
  const r = await sh(runtime, container, `ipc tool.invoke.${tool} "$(cat ${name})"; code=$?; rm -f ${name}; exit $code`);
  const ms = Math.round(performance.now() - started);
  const parse = <U>(text: string): U | null => {
    try {
      return JSON.parse(text) as U;
    } catch {
      return null;
    }
  };
  return { code: r.code, result: r.code === 0 ? parse<T>(r.out) : null, error: r.code === 0 ? null : parse(r.err), ms };
}

/** Writes a file into the agent's workspace from inside its container (as the agent would with its Write tool). */
export async function writeIn(runtime: DockerRuntime, container: string, path: string, text: string): Promise<void> {
  const b64 = Buffer.from(text).toString('base64');
  const r = await sh(runtime, container, `mkdir -p "$(dirname '${path}')" && echo '${b64}' | base64 -d > '${path}'`);
  if (r.code !== 0) throw new Error(`could not write ${path}: ${r.err}`);
}
