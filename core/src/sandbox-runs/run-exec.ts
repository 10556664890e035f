// One run in a session's sandbox: a `docker exec` as uid 1000 of a small wrapper that
// empties /out, runs the program, then kills whatever the run left behind. The core holds
// each limit, killing a run with `kill -9 -1` as uid 1000 (the sweep: every process of the
// run, its wrapper included, never the sandbox's own, which run as another user):
// - wall time: at its timeout the run is swept; an exec that outlives its timeout by
//   OUTLIVE_GRACE_MS gets its sandbox removed. (Not coreutils `timeout` in the wrapper:
//   under gVisor that one more process cost ~30 ms of every run.)
// - output: stdout and stderr kept to their bound (bounded-output.ts); a run that writes
//   more than MAX_STREAM_BYTES in all is swept at once;
// - memory and processes: the engine's; under runsc the whole sandbox stops at them,
//   which the run reports (`sandbox_stopped`).
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { BoundedOutput } from './bounded-output.js';
import { OUT_DIR, RUN_USER, WORKSPACE_DIR } from './container-spec.js';

/** A run writing more than this on stdout and stderr together is killed. */
export const MAX_STREAM_BYTES = 4 * 1024 * 1024;
/** How long past its timeout an exec may last before the core removes its sandbox. */
export const OUTLIVE_GRACE_MS = 3000;
/** How long a kill (the output bound, the sweep after a run) may take before the core removes the sandbox instead. */
const KILL_GRACE_MS = 15_000;
/**
 * How often a running exec's sandbox is looked at: under runsc a sandbox that stopped (at
 * its process limit) can leave its exec's stream open until the core ends it.
 */
const WATCH_MS = 1000;

/** $1...: interpreter, program, arguments. */
const WRAPPER = [
  // An earlier run's leftovers (uid 1000's processes only), and its files in /out (`rm` only
  // when there are any: each process started costs, most of all under gVisor).
  'kill -9 -1 2>/dev/null',
  `for f in ${OUT_DIR}/* ${OUT_DIR}/.[!.]* ${OUT_DIR}/..?*; do if [ -e "$f" ] || [ -h "$f" ]; then rm -rf ${OUT_DIR}/* ${OUT_DIR}/.[!.]* ${OUT_DIR}/..?* 2>/dev/null; break; fi; done`,
  // Matplotlib's font cache, built into the image (Dockerfile.sandbox).
  '[ -d /tmp/matplotlib ] || cp -r /usr/local/share/carapace-matplotlib /tmp/matplotlib 2>/dev/null',
  '"$@"',
  'code=$?',
  'kill -9 -1 2>/dev/null',
  'exit $code',
].join('\n');

const SWEEP = 'kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null; exit 0';

export interface RunCommand {
  interpreter: 'python3' | 'node' | 'sh';
  /** Relative to `dir`, normalized (run-program-tool.ts, skills/run-skill-tool.ts). */
  program: string;
  args: string[];
  timeoutS: number;
  /** Where the program is: the workspace (default), or a skill's folder (/skill). */
  dir?: string;
  /** More environment for this run only (a skill's settings, relay and secrets): never the sandbox's own. */
  env?: string[];
}

export type Killed = null | 'timeout' | 'output_limit' | 'sandbox_stopped';

export interface ExecOutcome {
  exitCode: number | null;
  durationMs: number;
  stdout: BoundedOutput;
  stderr: BoundedOutput;
  killed: Killed;
  /** The sandbox is gone or stopped: it cannot be kept warm. */
  lost: boolean;
}

/** The streams of an exec started with `hijack`, ended once the exec's output ends. */
async function attach(docker: Docker, exec: Docker.Exec, stdin: Buffer | null): Promise<{ stream: NodeJS.ReadWriteStream; stdout: PassThrough; stderr: PassThrough; ended: Promise<void> }> {
  const stream = (await exec.start({ hijack: true, stdin: stdin !== null })) as NodeJS.ReadWriteStream;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  const ended = new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
  });
  if (stdin !== null) {
    stream.write(stdin);
    stream.end();
  }
  return { stream, stdout, stderr, ended };
}

/** Kills every process of uid 1000 in the sandbox; false if that could not be made sure of (the caller removes the sandbox). */
export async function sweep(docker: Docker, id: string): Promise<boolean> {
  try {
    const exec = await docker.getContainer(id).exec({ Cmd: ['sh', '-c', SWEEP], User: RUN_USER, AttachStdout: true, AttachStderr: true });
    const { ended, stdout, stderr, stream } = await attach(docker, exec, null);
    stdout.resume();
    stderr.resume();
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([ended.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), KILL_GRACE_MS)))]);
    clearTimeout(timer);
    if (!inTime) {
      (stream as NodeJS.ReadWriteStream & { destroy(): void }).destroy();
      return false;
    }
    return (await exec.inspect()).ExitCode === 0;
  } catch {
    return false;
  }
}

/** False once the sandbox has stopped or is gone; an engine that does not answer says nothing of it (true). */
async function stillRunning(container: Docker.Container): Promise<boolean> {
  return container.inspect().then(
    (i) => i.State.Running,
    (err: { statusCode?: number }) => err.statusCode !== 404,
  );
}

/** `running`: called once the exec runs (the engine's lock on the container no longer holds it up). */
export async function execRun(docker: Docker, id: string, cmd: RunCommand, remove: () => Promise<void>, running?: () => void): Promise<ExecOutcome> {
  const container = docker.getContainer(id);
  const exec = await container.exec({
    Cmd: ['sh', '-c', WRAPPER, 'carapace-run', cmd.interpreter, `${cmd.dir ?? WORKSPACE_DIR}/${cmd.program}`, ...cmd.args],
    User: RUN_USER,
    WorkingDir: WORKSPACE_DIR,
    Env: [`OUT=${OUT_DIR}`, ...(cmd.env ?? [])],
    AttachStdout: true,
    AttachStderr: true,
  });
  const started = performance.now();
  const { stream, stdout, stderr, ended } = await attach(docker, exec, null);
  running?.();
  // A removed container does not always end its exec's stream: the core ends it then.
  const drop = (): void => (stream as NodeJS.ReadWriteStream & { destroy(): void }).destroy();
  const out = new BoundedOutput();
  const err = new BoundedOutput();
  let killed: Killed = null;
  let lost = false;
  /** Ends the run for `why`: swept, or its sandbox removed if that cannot be made sure of. */
  const end = (why: 'timeout' | 'output_limit'): void => {
    if (killed !== null) return;
    killed = why;
    void sweep(docker, id).then(async (ok) => {
      if (ok) return;
      lost = true;
      await remove();
      drop();
    });
  };
  const flooded = (): void => {
    if (out.total + err.total > MAX_STREAM_BYTES) end('output_limit');
  };
  stdout.on('data', (chunk: Buffer) => {
    out.push(chunk);
    flooded();
  });
  stderr.on('data', (chunk: Buffer) => {
    err.push(chunk);
    flooded();
  });
  const timeout = setTimeout(() => end('timeout'), cmd.timeoutS * 1000);
  const deadline = setTimeout(() => {
    killed = 'timeout';
    lost = true;
    void remove().then(drop);
  }, cmd.timeoutS * 1000 + OUTLIVE_GRACE_MS);
  let over = false;
  const watch = setInterval(() => {
    void stillRunning(container).then((running) => {
      if (running || over || lost) return;
      lost = true;
      killed ??= 'sandbox_stopped';
      drop();
    });
  }, WATCH_MS);
  await ended;
  over = true;
  clearTimeout(timeout);
  clearTimeout(deadline);
  clearInterval(watch);
  const durationMs = Math.round(performance.now() - started);
  const exitCode = lost ? null : ((await exec.inspect().catch(() => null))?.ExitCode ?? null);
  if (!lost && (exitCode === null || exitCode >= 126)) {
    if (!(await stillRunning(container))) {
      lost = true;
      if (killed === null) killed = 'sandbox_stopped';
    }
  }
  return { exitCode, durationMs, stdout: out, stderr: err, killed, lost };
}

/**
 * Runs `cmd` in a container as uid 1000 with `input` on its stdin (write-outputs.ts):
 * its exit code (null if it did not end in `timeoutMs`) and the end of its stderr.
 */
export async function execWithInput(docker: Docker, id: string, cmd: string[], input: Buffer, timeoutMs: number): Promise<{ exitCode: number | null; stderr: string }> {
  const exec = await docker.getContainer(id).exec({ Cmd: cmd, User: RUN_USER, AttachStdin: true, AttachStdout: true, AttachStderr: true });
  const { stream, stdout, stderr, ended } = await attach(docker, exec, input);
  let tail = '';
  stdout.resume();
  stderr.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString('utf8')).slice(-1000)));
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([ended.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
  clearTimeout(timer);
  if (!inTime) {
    (stream as NodeJS.ReadWriteStream & { destroy(): void }).destroy();
    return { exitCode: null, stderr: tail };
  }
  return { exitCode: (await exec.inspect()).ExitCode ?? null, stderr: tail };
}
