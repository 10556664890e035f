// A stand-in for the container runtime: each "container" is a script run per turn in this
// process, with the real ipc binary against the session's real socket. For tests of what
// the core does around turns (queues, notices), where Claude Code itself is not the point.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AgentManager } from '../../src/agents/agent-manager.js';
import type { AgentProcess, AgentRuntime, AgentSpec } from '../../src/agents/runtime.js';
import { parseConfig } from '../../src/config.js';
import { LlmProxy } from '../../src/llm/llm-proxy.js';
import { IPC_BIN, ROOT, type Stack } from '../harness.js';

/** Runs `ipc <topic> <args>` as the agent of the session whose socket is `socket`: its stdout, or its stderr on failure. */
export async function agentIpc(socket: string, topic: string, args: unknown): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(IPC_BIN, [topic, JSON.stringify(args)], { env: { CARAPACE_IPC_ENDPOINT: `ipc://${socket}`, CARAPACE_IPC_TIMEOUT_MS: '10000' } });
    return stdout;
  } catch (err) {
    return (err as { stderr?: string }).stderr ?? 'failed';
  }
}

/** Each turn runs `turn(prompt, socket, session)`, then reports success (with the text it returns) as Claude Code's stream-json would. */
export function scriptedRuntime(turn: (prompt: string, socket: string, session: string) => Promise<string | void>): AgentRuntime {
  const attached = (spec: AgentSpec): AgentProcess => {
    const socket = join(spec.mounts.find((m) => m.target === '/run/carapace')!.source, 'carapace.sock');
    let onLine: (line: string) => void = () => undefined;
    return {
      send(line: string) {
        const message = JSON.parse(line) as { message?: { content?: Array<{ text?: string }> | string } };
        const content = message.message?.content;
        const prompt = typeof content === 'string' ? content : (content ?? []).map((c) => c.text ?? '').join('');
        void turn(prompt, socket, spec.session)
          .catch(() => undefined)
          .then((text) => onLine(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: text || 'done' })));
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

/** An agent manager of `stack`'s core on `runtime` for `groups` (carapace.json's `agents` on top), started by the core's events as in main.ts. */
export function scriptedManager(stack: Stack, runtime: AgentRuntime, instance: string, options: { groups?: string[]; agents?: Record<string, unknown> } = {}): AgentManager {
  const defaults = parseConfig({ agents: { disk_quota_mb: 0, ...options.agents } });
  const llm = new LlmProxy({ upstream: 'http://127.0.0.1:9', credential: { apiKey: 'k' }, audit: stack.core.audit, settings: defaults.llm, notify: () => undefined });
  const paths = { groupsDir: join(stack.dir, 'groups'), stateDir: join(stack.dir, 'state'), agentImageDir: join(ROOT, 'agent-image'), instance: `${instance}-${process.pid}` };
  const manager = new AgentManager(stack.core, runtime, llm, defaults.agents, paths, () => options.groups ?? ['family']);
  stack.core.on('event', (event) => void manager.onEvent(event)?.catch(() => undefined));
  return manager;
}
