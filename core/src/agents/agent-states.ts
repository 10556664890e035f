// What each group's agent is doing now, for the console's Agents page and live stream.
// The agent manager sets it; nothing here decides anything.
import { EventEmitter } from 'node:events';

export type AgentStateName = 'starting' | 'working' | 'idle' | 'stopped' | 'failed';

export interface AgentState {
  group: string;
  state: AgentStateName;
  container: string | null;
  session: string | null;
  /** When it entered this state (ISO). */
  since: string;
  /** When its last turn ended (ISO), if one has. */
  last_turn: string | null;
}

export class AgentStates extends EventEmitter<{ change: [AgentState] }> {
  private readonly table = new Map<string, AgentState>();

  set(group: string, state: AgentStateName, held?: { container: string | null; session: string | null }, turnEnded = false): void {
    const before = this.table.get(group);
    const now = new Date().toISOString();
    const next: AgentState = {
      group,
      state,
      container: held ? held.container : before?.container ?? null,
      session: held ? held.session : before?.session ?? null,
      since: before?.state === state ? before.since : now,
      last_turn: turnEnded ? now : before?.last_turn ?? null,
    };
    this.table.set(group, next);
    this.emit('change', next);
  }

  list(): AgentState[] {
    return [...this.table.values()];
  }
}
