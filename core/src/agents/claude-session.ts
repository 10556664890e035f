// One long-lived Claude Code process per agent container, in stream-json mode: each
// message is one JSON line on stdin, and the turn ends with a "result" line. A warm
// agent therefore starts working on a message at once, without a process start.
import type { AgentProcess } from './runtime.js';

/**
 * Where Claude Code may take configuration from: the image's managed settings and the
 * user level (~/.claude: its settings.json, CLAUDE.md and skills are the core's read-only
 * overlays, the rest a state folder fresh for each session). Never the project, i.e. the
 * agent's writable workspace: its .claude/ (settings, settings.local, commands, agents,
 * skills, output styles, rules), CLAUDE.md and CLAUDE.local.md at any depth, .mcp.json.
 * MCP servers only from --mcp-config, which is never given. api-server.mjs passes the
 * same flags (API mode).
 */
export const CLAUDE_LOCKDOWN_FLAGS = ['--setting-sources', 'user', '--strict-mcp-config'];

export const CLAUDE_COMMAND = ['claude', '-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose', ...CLAUDE_LOCKDOWN_FLAGS];

export type TurnStatus = 'ok' | 'error' | 'timeout' | 'exited';

export interface TurnResult {
  status: TurnStatus;
  /** The final text of the turn (or what Claude Code said about its failure). */
  output: string;
}

/** How the agent manager runs turns: a ClaudeSession (legacy) or an ApiClient (API mode). */
export interface TurnRunner {
  turn(prompt: string, timeoutMs: number): Promise<TurnResult>;
  close(): void;
}

interface ResultLine {
  type: 'result';
  subtype?: string;
  is_error?: boolean;
  result?: unknown;
}

export class ClaudeSession implements TurnRunner {
  private pending: ((r: TurnResult) => void) | null = null;
  private alive = true;

  constructor(private readonly process: AgentProcess) {
    process.onLine((line) => this.onLine(line));
    process.onExit(() => {
      this.alive = false;
      this.finish({ status: 'exited', output: process.stderrTail() });
    });
  }

  /** Runs one turn; turns never overlap (the agent manager queues per group). */
  turn(prompt: string, timeoutMs: number): Promise<TurnResult> {
    if (!this.alive) return Promise.resolve({ status: 'exited', output: '' });
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.finish({ status: 'timeout', output: '' }), timeoutMs);
      this.pending = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
      this.process.send(JSON.stringify({ type: 'user', message: { role: 'user', content: [{ type: 'text', text: prompt }] } }));
    });
  }

  private onLine(line: string): void {
    let message: Partial<ResultLine>;
    try {
      message = JSON.parse(line) as Partial<ResultLine>;
    } catch {
      return;
    }
    if (message.type !== 'result') return;
    const ok = message.subtype === 'success' && message.is_error !== true;
    this.finish({ status: ok ? 'ok' : 'error', output: typeof message.result === 'string' ? message.result : '' });
  }

  private finish(result: TurnResult): void {
    const pending = this.pending;
    this.pending = null;
    pending?.(result);
  }

  close(): void {
    this.process.close();
  }
}
