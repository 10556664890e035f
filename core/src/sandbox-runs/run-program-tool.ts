// run_program, the core's tool for computing: its schema (checked at stage 3 like any
// tool's), what its arguments must mean beyond the schema (a program inside the workspace,
// an interpreter), and what the agent's skill says about it (agents/skills.ts).
import { posix } from 'node:path';
import type { Session } from '../boundary/session-table.js';
import type { CallContext, IntrinsicDefinition, IntrinsicDeps } from '../intrinsics/intrinsic-types.js';
import type { JsonObject } from '../protocol/envelope.js';
import { pipelineError, ToolFailure } from '../protocol/errors.js';
import type { RunCommand } from './run-exec.js';

export const RUN_PROGRAM_NAME = 'run_program';
const INTERPRETERS = ['python3', 'node', 'sh'] as const;
const BY_EXTENSION: Record<string, RunCommand['interpreter']> = { '.py': 'python3', '.js': 'node', '.mjs': 'node', '.cjs': 'node', '.sh': 'sh' };
/** How the agent sees its workspace; a program named from there means the same file. */
const AGENT_WORKSPACE = '/workspace/group/';

const schema: JsonObject = {
  type: 'object',
  additionalProperties: false,
  required: ['program'],
  properties: {
    program: { type: 'string', minLength: 1, maxLength: 512, description: 'the program file, relative to your workspace, e.g. "scripts/chart.py"' },
    interpreter: { enum: [...INTERPRETERS], description: 'default from the extension: .py python3, .js/.mjs/.cjs node, .sh sh' },
    args: { type: 'array', maxItems: 64, items: { type: 'string', maxLength: 4096, pattern: '^[^\\u0000]*$' }, default: [], description: "the program's arguments" },
    timeout_s: { type: 'integer', minimum: 1, maximum: 300, default: 60, description: 'the run is killed after this many seconds' },
  },
};

function invalid(field: string, message: string): ToolFailure {
  return new ToolFailure(pipelineError('VALIDATION_FAILED', message, false, { stage: 6, field }));
}

/** The run the (schema-valid) arguments ask for, or why not. `maxTimeoutS`: carapace.json's sandbox.timeout_s. */
export function runCommand(args: JsonObject, maxTimeoutS: number): RunCommand | ToolFailure {
  let given = String(args.program);
  if (given.startsWith(AGENT_WORKSPACE)) given = given.slice(AGENT_WORKSPACE.length);
  const program = posix.normalize(given);
  if (/\p{Cc}/u.test(given) || given.startsWith('/') || program === '..' || program.startsWith('../') || program === '.' || program.endsWith('/')) {
    return invalid('program', 'program: a file in your workspace, named relative to it (e.g. "scripts/chart.py")');
  }
  const interpreter = (args.interpreter as RunCommand['interpreter'] | undefined) ?? BY_EXTENSION[posix.extname(program).toLowerCase()];
  if (!interpreter) return invalid('interpreter', `interpreter: say which one runs "${posix.basename(program)}": ${INTERPRETERS.join(', ')}`);
  const timeoutS = (args.timeout_s as number | undefined) ?? 60;
  if (timeoutS > maxTimeoutS) return invalid('timeout_s', `timeout_s: at most ${maxTimeoutS} here`);
  return { interpreter, program, args: (args.args as string[] | undefined) ?? [], timeoutS };
}

export const RUN_PROGRAM: IntrinsicDefinition = {
  name: RUN_PROGRAM_NAME,
  description: 'Run a program from your workspace (Python 3, Node or sh) in a sandbox with no network; the files it writes to /out come back into your workspace under runs/<run_id>/',
  schema,
  acts: true,
  run: (args: JsonObject, session: Session, deps: IntrinsicDeps, call: CallContext) =>
    deps.runs ? deps.runs.run(args, session, call) : new ToolFailure({ code: 'SANDBOX_UNAVAILABLE', message: 'programs cannot run on this installation (it has no sandbox)', retriable: false, stage: 6 }),
};

/** What the agent's carapace-core skill says about run_program, after its generated section. */
export const RUN_PROGRAM_GUIDE = [
  '### Running programs: charts, tables, conversions',
  '',
  'Your own shell runs only `ipc`. To compute, write a program into your workspace and run it with run_program.',
  'It runs in a separate sandbox: Python 3 (numpy, pandas, matplotlib, Pillow, openpyxl), Node 22, sh with coreutils,',
  'poppler-utils (pdftotext, pdftoppm) and ImageMagick. The sandbox has no network and no secrets.',
  '',
  '- Your workspace is `/workspace` there, read-only: read inputs by relative path (`data/sales.csv`).',
  '- Write every file you want back into `/out` (also in `$OUT`). After the run they are in your workspace under',
  '  `runs/<run_id>/`; the answer lists each in `outputs` (with its path) and anything refused in `refused_outputs`',
  '  (only regular files come back: at most 50, 32 MB in all).',
  '- `/tmp` is scratch space (64 MB); `/out` holds 64 MB. Memory 512 MB, one CPU, `timeout_s` at most 300.',
  '- The answer has `exit_code`, `timed_out`, `stdout` and `stderr` (each cut to 64 KB, `stdout_cut_bytes` says how much',
  '  was cut) and `killed` when a limit ended the run. One run at a time: a second one gets RUN_BUSY.',
  '',
  'Example: chart a CSV and send it. Write `scripts/chart.py`:',
  '',
  '```python',
  'import pandas as pd, matplotlib.pyplot as plt',
  "df = pd.read_csv('data/sales.csv')",
  "df.plot(x='month', y='total')",
  "plt.savefig('/out/chart.png')",
  '```',
  '',
  'then run it and send the chart with the `path` from `outputs`:',
  '',
  '```',
  `ipc tool.invoke.run_program '{"program":"scripts/chart.py"}'`,
  '```',
].join('\n');
