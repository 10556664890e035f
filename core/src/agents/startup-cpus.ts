// Legacy mode: a higher CPU limit while Claude Code starts, lowered to the configured one
// before the model's first answer reaches the agent.
//
// Why: Claude Code's start-up is ~0.6-0.7 s of CPU spread over several threads
// (JavaScriptCore's compiler and collector beside the main thread). Under a 1-CPU quota
// the engine throttled it in 5-6 of its first 6-8 scheduling periods (86-140 ms in
// cpu.stat), ~100 ms of every cold start.
//
// Why it is safe: the limit is there to bound what an agent acting for the model can take
// from the host. Until the model's first answer arrives nothing in the container acts for
// it: hooks and MCP servers may come only from the managed settings (which define none),
// and the Bash tool runs only what the model asks for. The LLM proxy withholds that first
// answer until the configured limit is back in force; if it cannot be set, the container
// is removed and the answer never relayed.
import type { AgentRuntime } from './runtime.js';

/** The start-up allowance (the runtime caps it at the host's CPUs); never below the configured limit. */
const STARTUP_CPUS = 2;

export class StartupCpus {
  private settled: Promise<void> | null = null;
  private resolveId: (id: string) => void = () => undefined;
  private readonly id = new Promise<string>((resolve) => (this.resolveId = resolve));

  constructor(
    private readonly runtime: AgentRuntime,
    /** The configured limit, which holds from the first model answer on. */
    private readonly nanoCpus: number,
  ) {}

  /** What the container starts with. */
  get startNanoCpus(): number {
    return Math.max(this.nanoCpus, STARTUP_CPUS * 1e9);
  }

  started(id: string): void {
    this.resolveId(id);
  }

  /** Lowers the limit once (later calls share the outcome). Rejects after removing the container. */
  settle(): Promise<void> {
    this.settled ??= this.id.then(async (id) => {
      try {
        await this.runtime.limitCpus(id, this.nanoCpus);
      } catch (err) {
        await this.runtime.remove(id).catch(() => undefined);
        throw new Error(`the agent's CPU limit could not be restored, so it was removed: ${(err as Error).message}`);
      }
    });
    return this.settled;
  }
}
