// Every run in the audit log (Activity): what ran (the program, with its size and SHA-256:
// program-digest.ts; the interpreter, how many arguments), how it
// ended (exit code, timed out, what limit killed it, how long), what it printed (bytes),
// and what came back or was refused (names, sizes). Its arguments (usually the input files'
// names) are shown escaped and bounded, as the agent wrote them.
import type { AuditLog } from '../audit/audit-log.js';
import type { Session } from '../boundary/session-table.js';
import { bound, escapeText } from '../text/escape.js';
import type { ProgramDigest } from './program-digest.js';
import type { RunCommand } from './run-exec.js';

export interface RunRecord {
  runId: string;
  command: RunCommand;
  program: ProgramDigest | null;
  sandbox: { container: string; runtime: string; cold: boolean };
  answer: RunAnswer;
  /** The tool the run answered: run_program, or run_skill with the skill's name. */
  tool: string;
  skill?: string;
}

export interface RunAnswer {
  run_id: string;
  exit_code: number | null;
  timed_out: boolean;
  killed: null | 'timeout' | 'output_limit' | 'sandbox_stopped';
  note?: string;
  duration_ms: number;
  stdout: string;
  stderr: string;
  stdout_cut_bytes: number;
  stderr_cut_bytes: number;
  stdout_bytes: number;
  stderr_bytes: number;
  outputs: { path: string; bytes: number }[];
  refused_outputs: { name: string; reason: string }[];
  refused_count: number;
}

/** The arguments as a person reads them: each escaped and cut to 80 characters, 300 in all. */
function shownArgs(args: string[]): string {
  return bound(args.map((a) => bound(escapeText(a), 80)).join(' '), 300);
}

function kb(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KB`;
}

export function auditRun(audit: AuditLog, session: Session, correlation: string, record: RunRecord): void {
  const { answer, command } = record;
  const ended = answer.killed === 'timeout' ? `killed at its timeout (${command.timeoutS} s)` : answer.killed === 'output_limit' ? 'killed: too much output' : answer.killed === 'sandbox_stopped' ? 'the sandbox stopped (memory or process limit)' : `exit ${answer.exit_code}`;
  const outputs = answer.outputs.map((o) => `${o.path} (${kb(o.bytes)})`).join(', ');
  const refused = answer.refused_count > 0 ? `; ${answer.refused_count} refused` : '';
  const what = record.skill ? `skill ${record.skill}: ${escapeText(command.program)}` : escapeText(command.program);
  const args = command.args.length > 0 ? ` ${shownArgs(command.args)}` : '';
  const reason = `run ${answer.run_id}: ${command.interpreter} ${what}${args}, ${ended} after ${answer.duration_ms} ms; ${answer.outputs.length} output${answer.outputs.length === 1 ? '' : 's'}${outputs ? `: ${outputs}` : ''}${refused}`;
  const code = answer.timed_out ? 'RUN_TIMEOUT' : answer.killed ? 'RUN_KILLED' : answer.refused_count > 0 ? 'RUN_OUTPUT_REFUSED' : undefined;
  const detail = {
    run_id: answer.run_id,
    ...(record.skill ? { skill: record.skill } : {}),
    program: command.program,
    program_bytes: record.program?.bytes ?? null,
    program_sha256: record.program?.sha256 ?? null,
    program_mtime: record.program?.mtime ?? null,
    program_digest_reused: record.program?.reused ?? null,
    interpreter: command.interpreter,
    args_count: command.args.length,
    timeout_s: command.timeoutS,
    exit_code: answer.exit_code,
    timed_out: answer.timed_out,
    killed: answer.killed,
    duration_ms: answer.duration_ms,
    stdout_bytes: answer.stdout_bytes,
    stderr_bytes: answer.stderr_bytes,
    outputs: answer.outputs,
    refused_outputs: answer.refused_outputs,
    refused_count: answer.refused_count,
    sandbox: record.sandbox,
  };
  audit.record({ group: session.group, session: session.id, source: 'core', topic: `tool.invoke.${record.tool}`, correlation, stage: 'handler', outcome: code ? 'error' : 'ok', ...(code ? { code } : {}), duration_ms: answer.duration_ms, reason, detail: JSON.stringify(detail) });
}
