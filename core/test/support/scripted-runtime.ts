// A stand-in for the container runtime: each "container" is a script run per turn in this
// process, with the real ipc binary against the session's real socket. For tests of what
// the core does around turns (queues, notices), where Claude Code itself is not the point.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AgentProcess, AgentRuntime, AgentSpec } from '../../src/agents/runtime.js';
import { IPC_BIN } from '../harness.js';

/** Runs `ipc <topic> <args>` as the agent of the session whose socket is `socket`: its stdout, or its stderr on failure. */
export async function agentIpc(socket: string, topic: string, args: unknown): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(IPC_BIN, [topic, JSON.stringify(args)], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${socket}`, CARAPACE_IPC_TIMEOUT_MS: '10000' } });
    return stdout;
  } catch (err) {
    return (err as { stderr?: string }).stderr ?? 'failed';
  }
}

/** Each turn runs `turn(prompt, socket)`, then reports success as Claude Code's stream-json would. */
export function scriptedRuntime(turn: (prompt: string, socket: string) => Promise<void>): AgentRuntime {
  const attached = (spec: AgentSpec): AgentProcess => {
    const socket = join(spec.mounts.find((m) => m.target === '/run/carapace')!.source, 'carapace.sock');
    let onLine: (line: string) => void = () => undefined;
    return {
      send(line: string) {
        const message = JSON.parse(line) as { message?: { content?: Array<{ text?: string }> | string } };
        const content = message.message?.content;
        const prompt = typeof content === 'string' ? content : (content ?? []).map((c) => c.text ?? '').join('');
        void turn(prompt, socket).finally(() => onLine(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'done' })));
      },
      onLine: (listener) => (onLine = listener),
      onExit: () => undefined,
      stderrTail: () => '',
      close: () => undefined,
    };
  };
  return {
    start: () => Promise.reject(new Error('legacy mode only')),
    startAttached: async (spec) => ({ id: `fake-${spec.session}`, process: attached(spec) }),
    limitCpus: async () => undefined,
    isRunning: async () => true,
    remove: async () => undefined,
    listManaged: async () => [],
  };
}
