// The core's own record of who is on which socket. A request's group and source come
// from here, looked up by the socket it arrived on, never from the message.
import { randomBytes } from 'node:crypto';

export const GROUP_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

export interface Session {
  id: string;
  group: string;
  startedAt: string;
  container: string | null;
  socketPath: string;
  /**
   * A scheduled task's run happened in this session: from then on its calls may be the
   * agent acting unattended (tools with `task_run_risk_level` ask a person).
   */
  taskStarted?: boolean;
  /**
   * External content (a mail) entered this session, by the event that started a turn or a
   * tool's answer: from then on an allow-list no longer lowers a tool's risk (pipeline/untrusted-input.ts).
   */
  untrustedInput?: boolean;
  /**
   * A check that may label the session runs (the workspace's files, at the start): its
   * requests wait for it. Never rejects; gone once done.
   */
  labelCheck?: Promise<void>;
}

export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  private readonly labelListeners: Array<(session: Session) => void> = [];

  create(group: string, socketPathFor: (id: string) => string): Session {
    if (!GROUP_NAME_PATTERN.test(group)) {
      throw new RangeError(`Invalid group name ${JSON.stringify(group)}: must match ${GROUP_NAME_PATTERN}`);
    }
    // Short ids keep socket paths under the 107-byte unix socket limit.
    const id = `agent-${randomBytes(6).toString('hex')}`;
    const session: Session = { id, group, startedAt: new Date().toISOString(), container: null, socketPath: socketPathFor(id) };
    this.sessions.set(id, session);
    return session;
  }

  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  setContainer(id: string, container: string): void {
    const session = this.sessions.get(id);
    if (session) session.container = container;
  }

  /** Sticky for the session's life: a task's run may leave work behind that calls later. */
  markTaskStarted(id: string): void {
    const session = this.sessions.get(id);
    if (session) session.taskStarted = true;
  }

  /** Sticky for the session's life: the content stays in the agent's context. Listeners hear the first time. */
  markUntrustedInput(id: string): void {
    const session = this.sessions.get(id);
    if (!session || session.untrustedInput) return;
    session.untrustedInput = true;
    for (const listener of this.labelListeners) listener(session);
  }

  /** Requests of the session wait for `check` (which labels it or not); a failed check labels it. */
  holdRequestsFor(id: string, check: Promise<void>): void {
    const session = this.sessions.get(id);
    if (!session) return;
    const held: Promise<void> = check
      .catch(() => this.markUntrustedInput(id))
      .finally(() => {
        if (session.labelCheck === held) delete session.labelCheck;
      });
    session.labelCheck = held;
  }

  /** Hears each session that reads external content, once (what it writes from then on is labelled: agents/workspace-labels.ts). */
  onLabelled(listener: (session: Session) => void): void {
    this.labelListeners.push(listener);
  }

  delete(id: string): void {
    this.sessions.delete(id);
  }

  all(): Session[] {
    return [...this.sessions.values()];
  }
}
