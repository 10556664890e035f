// Each session's own socket, opened and closed with its session: the trust boundary's
// lifecycle. A session that abuses its budget is quarantined: its socket closed for good,
// one CRITICAL audit entry, one notice to the person.
import { join } from 'node:path';
import type { AuditLog } from '../audit/audit-log.js';
import type { CoreConfig } from '../config.js';
import type { Confirmations } from '../confirm/confirmations.js';
import { refuseOverBudget, runPipeline, type PipelineDeps } from '../pipeline/pipeline.js';
import type { RateLimiter } from '../pipeline/rate-limit.js';
import { SOCKETS } from '../plugins/host-protocol.js';
import type { JsonObject } from '../protocol/envelope.js';
import { quarantineNotice, SessionGuard, type Abuse } from './session-guard.js';
import { SessionSocket } from './session-socket.js';
import type { Session, SessionTable } from './session-table.js';

export interface SessionSocketsDeps {
  runDir: string;
  /** The running configuration (its `sessions` bounds are read as each session opens). */
  config: CoreConfig;
  sessions: SessionTable;
  pipeline: PipelineDeps;
  limiter: RateLimiter;
  confirmations: Confirmations;
  audit: AuditLog;
  publish: (topic: string, group: string, payload: JsonObject) => void;
  closed: (event: { session: string; group: string }) => void;
  quarantined: (event: { session: string; group: string; abuse: Abuse }) => void;
}

export class SessionSockets {
  private readonly sockets = new Map<string, SessionSocket>();

  constructor(private readonly deps: SessionSocketsDeps) {}

  /** The sessions with a socket open. */
  ids(): string[] {
    return [...this.sockets.keys()];
  }

  /** Opens a session for a group: its own ROUTER socket in its own directory. */
  async open(group: string): Promise<Session> {
    const { sessions, pipeline, audit } = this.deps;
    const session = sessions.create(group, (id) => join(this.deps.runDir, SOCKETS.sessions, id, 'carapace.sock'));
    const guard = new SessionGuard(this.deps.config.sessions, (abuse) => void this.quarantine(session.id, abuse));
    const socket = new SessionSocket(session.socketPath, guard);
    try {
      await socket.open(
        (frames, reply, interim) => {
          // runPipeline never rejects; a reply to a peer that has gone is dropped.
          void runPipeline(frames, session, pipeline, interim).then(reply).catch(() => undefined);
        },
        (frames, refusal) => refuseOverBudget(frames, session, refusal.retryAfter, refusal.why, pipeline),
      );
    } catch (err) {
      sessions.delete(session.id);
      throw err;
    }
    this.sockets.set(session.id, socket);
    audit.record({ group, session: session.id, source: 'core', topic: null, correlation: null, stage: 'session', outcome: 'ok', reason: 'session opened' });
    return session;
  }

  async close(id: string): Promise<void> {
    const { sessions, limiter, confirmations, audit } = this.deps;
    const socket = this.sockets.get(id);
    const session = sessions.get(id);
    this.sockets.delete(id);
    sessions.delete(id);
    limiter.forgetSession(id);
    // Its caller is gone: what it asked a person for must not run any more.
    confirmations.withdrawSession(id, 'core: session ended');
    await socket?.close();
    if (session) {
      audit.record({ group: session.group, session: id, source: 'core', topic: null, correlation: null, stage: 'session', outcome: 'ok', reason: 'session closed' });
      this.deps.closed({ session: id, group: session.group });
    }
  }

  /**
   * Ends a session that abused its budget (request or connection flood, unread replies,
   * or any caller's own bound): its socket closes at once and is never reopened, one
   * CRITICAL audit entry, one notice to the user, and a `quarantined` event for whoever
   * owns its container. Other sessions are untouched. Idempotent.
   */
  async quarantine(id: string, abuse: Abuse): Promise<void> {
    const session = this.deps.sessions.get(id);
    if (!session) return; // gone already (close forgets it at once): one quarantine per session
    this.deps.audit.record({ group: session.group, session: id, source: 'core', topic: null, correlation: null, stage: 'session', outcome: 'error', severity: 'CRITICAL', code: 'QUARANTINED', reason: `session quarantined: ${abuse.kind}`, detail: abuse.detail });
    this.deps.publish('user.notify', session.group, { text: quarantineNotice(abuse) });
    this.deps.quarantined({ session: id, group: session.group, abuse });
    await this.close(id);
  }
}
