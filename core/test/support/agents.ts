// Agent managers as the docker tests and the agent start-up benchmark build them: the
// stack's core, an LLM proxy of their own in front of a model stand-in, the stack's
// groups and state folders and the repository's agent-image. No Jest here: the
// benchmarks import this outside Jest.
import { join } from 'node:path';
import { AgentManager, type EarlierConversation } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { parseConfig } from '../../src/config.js';
import { LlmProxy } from '../../src/llm/llm-proxy.js';
import { ROOT, type Stack } from '../harness.js';

/** The agent image the docker tests run (make images AGENT_IMAGE=... builds another tag). */
export const AGENT_IMAGE = process.env.CARAPACE_AGENT_IMAGE || 'carapace-agent:latest';

/**
 * The runtime the docker tests' agents run under: CARAPACE_AGENT_RUNTIME (runsc, runc),
 * else what the product does (auto: runsc where the engine has it). CI runs the agent
 * suites under both.
 */
export const AGENT_RUNTIME = (process.env.CARAPACE_AGENT_RUNTIME || 'auto') as 'auto' | 'runsc' | 'runc';

export function testRuntime(): DockerRuntime {
  return new DockerRuntime({ sandbox: AGENT_RUNTIME, image: AGENT_IMAGE });
}

export interface AgentManagerOptions {
  /** The model (stand-in) the LLM proxy forwards to, and the key it adds to every request. */
  upstream: string;
  apiKey: string;
  /** carapace.json's `agents` section; parseConfig fills in the rest. */
  agents: Record<string, unknown>;
  /** Labels the containers, so that removeOrphans() and listManaged() see only these. */
  instance: string;
  runtime?: DockerRuntime;
  /** The groups the manager knows (default: family). */
  groups?: string[];
  /** carapace.json's `llm` section (models, max_tokens, budgets); parseConfig fills in the rest. */
  llm?: Record<string, unknown>;
  /** The group's earlier conversation for a new session's first prompt (conversation/). */
  earlier?: EarlierConversation;
}

export function newAgentManager(stack: Stack, options: AgentManagerOptions): AgentManager {
  const llm = new LlmProxy({
    upstream: options.upstream,
    credential: { apiKey: options.apiKey },
    audit: stack.core.audit,
    settings: parseConfig({ llm: options.llm ?? {} }).llm,
    notify: (group, text) => void stack.core.publish('user.notify', group, { text }),
  });
  const groups = options.groups ?? ['family'];
  return new AgentManager(
    stack.core,
    options.runtime ?? testRuntime(),
    llm,
    // Disk quotas off unless a test asks (disk-quota.test.ts): each loop-mounted group costs
    // a helper container and a loop device, and these tests read workspaces on the host.
    parseConfig({ agents: { image: AGENT_IMAGE, disk_quota_mb: 0, runtime: AGENT_RUNTIME, ...options.agents } }).agents,
    { groupsDir: join(stack.dir, 'groups'), stateDir: join(stack.dir, 'state'), agentImageDir: join(ROOT, 'agent-image'), instance: options.instance },
    () => groups,
    undefined,
    null,
    options.earlier ?? null,
  );
}

/** A shell script run inside a container (as the agent's user, in its workspace). */
export async function sh(runtime: DockerRuntime, container: string, script: string): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runtime.exec(container, ['sh', '-c', script], 30_000);
  return { code: r.exitCode, out: r.stdout, err: r.stderr };
}
