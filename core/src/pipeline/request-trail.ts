// One request's audit entries. Until the request gets past the checks before routing
// they are held (all in the same turn of the event loop, timestamps taken as they
// happen): a request rejected there goes to the log as one unit that repeated
// rejections can summarise; anything that goes further is written whole, always.
import type { AuditEntry, AuditInput, AuditLog, AuditStage } from '../audit/audit-log.js';

/** Where a rejection is a cheap, repeatable refusal: before a person or a handler is involved. */
const SUMMARISED: ReadonlySet<AuditStage> = new Set<AuditStage>(['envelope', 'topic', 'payload', 'authorize', 'rate_limit']);

export interface AuditRecorder {
  record(input: AuditInput): unknown;
}

export class RequestTrail implements AuditRecorder {
  private held: AuditEntry[] | null = [];
  private summary: { stage: AuditStage; code: string } | null = null;

  constructor(
    private readonly audit: AuditLog,
    private readonly group: string,
    private readonly session: string,
  ) {}

  record(input: AuditInput): void {
    const entry = this.audit.stamp(input);
    if (this.held) this.held.push(entry);
    else this.audit.write(entry);
  }

  /** The request goes on (to a person or a handler): from here everything is written as it happens. */
  proceed(): void {
    const held = this.held;
    this.held = null;
    this.summary = null;
    for (const entry of held ?? []) this.audit.write(entry);
  }

  /** The request ends at `stage` with `code` (a rejection, or a repeat answered from memory). */
  endsAt(stage: AuditStage, code: string): void {
    if (this.held && SUMMARISED.has(stage)) this.summary = { stage, code };
  }

  /** After the response entry: the held entries go out, whole or summarised. */
  finish(): void {
    const held = this.held;
    if (held && this.summary) {
      this.held = null;
      this.audit.recordRejection({ group: this.group, session: this.session, ...this.summary }, held);
    } else {
      this.proceed();
    }
  }
}
