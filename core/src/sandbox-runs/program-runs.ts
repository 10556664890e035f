// run_program from call to answer: the arguments checked (run-program-tool.ts), the
// session's warm sandbox leased (warm-sandboxes.ts), the run (run-exec.ts), its files taken
// from /out (collect-outputs.ts) and written into the workspace under runs/<run-id>/
// (write-outputs.ts), the answer, and one audit entry (run-audit.ts).
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { AuditLog } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import type { CallContext, ProgramRunner } from '../intrinsics/intrinsic-types.js';
import type { JsonObject } from '../protocol/envelope.js';
import { ToolFailure } from '../protocol/errors.js';
import { collectOutputs, type Collected } from './collect-outputs.js';
import { execRun, type ExecOutcome, type RunCommand } from './run-exec.js';
import { ProgramDigests, type ProgramDigest } from './program-digest.js';
import { auditRun, type RunAnswer } from './run-audit.js';
import { runCommand } from './run-program-tool.js';
import { sandboxError, type Lease, type SandboxPlan, type WarmSandboxes } from './warm-sandboxes.js';
import { writeOutputs } from './write-outputs.js';

/** Beyond the run's timeout, how long the caller is told its answer may take (files, a cold start). */
const ANSWER_MARGIN_MS = 60_000;

export interface ProgramRunsDeps {
  docker: Docker;
  audit: AuditLog;
  sandboxes: WarmSandboxes;
  /** carapace.json's sandbox.timeout_s and memory_mb (for what a run is told). */
  maxTimeoutS: number;
  memoryMb: number;
}

/** 20261127-223001-3fa9c2: sortable, short enough to type, unguessable enough not to collide. */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

function noteFor(outcome: ExecOutcome, cmd: RunCommand, memoryMb: number): string | undefined {
  switch (outcome.killed) {
    case 'timeout':
      return `killed at its timeout (${cmd.timeoutS} s)`;
    case 'output_limit':
      return 'killed: it wrote more than 4 MB on stdout and stderr';
    case 'sandbox_stopped':
      return `the sandbox stopped: the run passed its memory (${memoryMb} MB) or process limit; the next run starts a new sandbox`;
    default:
      return outcome.exitCode === 137 ? `killed (SIGKILL): usually its memory limit (${memoryMb} MB)` : undefined;
  }
}

export class ProgramRuns implements ProgramRunner {
  private readonly digests: ProgramDigests;

  constructor(private readonly deps: ProgramRunsDeps) {
    this.digests = new ProgramDigests(deps.docker);
  }

  async run(args: JsonObject, session: Session, call: CallContext): Promise<RunAnswer | ToolFailure> {
    const cmd = runCommand(args, this.deps.maxTimeoutS);
    if (cmd instanceof ToolFailure) return cmd;
    return this.runIn(session, call, cmd, this.deps.sandboxes.programPlan, { tool: 'run_program' });
  }

  /**
   * `cmd` in the session's sandbox of `plan` (run_program's, or a skill's: skills/skill-runs.ts),
   * its files back into the workspace, audited under `tool` (and the skill's name).
   */
  async runIn(session: Session, call: CallContext, cmd: RunCommand, plan: SandboxPlan, audited: { tool: string; skill?: string }): Promise<RunAnswer | ToolFailure> {
    const agent = session.container;
    if (!agent) return sandboxError('SANDBOX_UNAVAILABLE', `${audited.tool} needs the agent's own container (a run's files come back into its workspace)`, false);
    call.keepWaiting(cmd.timeoutS * 1000 + ANSWER_MARGIN_MS);
    const runId = newRunId();
    let lease = await this.deps.sandboxes.lease(session.id, session.group, plan);
    if (lease instanceof ToolFailure) return lease;
    let ran = await this.attempt(lease, cmd);
    if (ran instanceof Error && !lease.cold) {
      // A warm sandbox that stopped while idle: once more in a new one.
      lease.release(false);
      lease = await this.deps.sandboxes.lease(session.id, session.group, plan);
      if (lease instanceof ToolFailure) return lease;
      ran = await this.attempt(lease, cmd);
    }
    if (ran instanceof Error) {
      lease.release(false);
      return sandboxError('SANDBOX_UNAVAILABLE', 'the program could not be started in the sandbox; try again', true, {}, ran.message);
    }
    const { outcome, collected, program } = ran;
    lease.release(!outcome.lost);
    const written = collected.files.length > 0 ? await writeOutputs(this.deps.docker, agent, runId, collected.files) : { ok: true as const };
    const answer = this.answer(runId, cmd, outcome, collected, written);
    const sandbox = { container: lease.id.slice(0, 12), runtime: lease.runtime, cold: lease.cold };
    auditRun(this.deps.audit, session, call.correlation, { runId, command: cmd, program, sandbox, answer, ...audited });
    return answer;
  }

  /**
   * The run, the program's digest (program-digest.ts) and what the run left in /out; an
   * Error when it could not start at all. The digest is read while the run goes, once its
   * exec has started: the engine holds its lock on the container while it reads (~50 ms),
   * which would hold up an exec being created or started, not one running. The workspace is
   * read-only in the sandbox, so the run cannot change what is read.
   */
  private async attempt(lease: Lease, cmd: RunCommand): Promise<{ outcome: ExecOutcome; collected: Collected; program: ProgramDigest | null } | Error> {
    const { docker } = this.deps;
    const remove = (): Promise<void> => docker.getContainer(lease.id).remove({ force: true, v: true }).catch(() => undefined);
    let digest: Promise<ProgramDigest | null> = Promise.resolve(null);
    try {
      const outcome = await execRun(docker, lease.id, cmd, remove, () => (digest = this.digests.of(lease.id, cmd.program, cmd.dir)));
      const [collected, program] = await Promise.all([outcome.lost ? { files: [], refused: [], refusedCount: 0 } : collectOutputs(docker, lease.id), digest]);
      return { outcome, collected, program };
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  }

  private answer(runId: string, cmd: RunCommand, outcome: ExecOutcome, collected: Collected, written: Awaited<ReturnType<typeof writeOutputs>>): RunAnswer {
    const stdout = outcome.stdout.result();
    const stderr = outcome.stderr.result();
    const refused = [...collected.refused];
    let refusedCount = collected.refusedCount;
    const outputs = written.ok ? collected.files.map((f) => ({ path: `runs/${runId}/${f.name}`, bytes: f.bytes.length })) : [];
    if (!written.ok) {
      refusedCount += collected.files.length;
      refused.unshift(...collected.files.map((f) => ({ name: f.name, reason: written.reason })));
    }
    const note = noteFor(outcome, cmd, this.deps.memoryMb);
    return {
      run_id: runId,
      exit_code: outcome.exitCode,
      timed_out: outcome.killed === 'timeout',
      killed: outcome.killed,
      ...(note ? { note } : {}),
      duration_ms: outcome.durationMs,
      stdout: stdout.text,
      stderr: stderr.text,
      stdout_cut_bytes: stdout.cut,
      stderr_cut_bytes: stderr.cut,
      stdout_bytes: outcome.stdout.total,
      stderr_bytes: outcome.stderr.total,
      outputs,
      refused_outputs: refused.slice(0, 20),
      refused_count: refusedCount,
    };
  }
}
