// Which OCI runtime runs the agents. gVisor (runsc) puts a user-space kernel between the
// agent and the host's: a kernel bug is then not a host escape. It is the default wherever
// the engine has it, registered as the README says; otherwise runc, and the core says how
// to get runsc. Agents must reach their host unix sockets (ipc, the LLM proxy) and, in API
// mode, bind one the core connects to: runsc allows both only with --host-uds=all.
import type Docker from 'dockerode';
import { StartupError } from '../protocol/errors.js';

export type SandboxSetting = 'auto' | 'runsc' | 'runc';

export interface Sandbox {
  /** The engine's runtime name given to each agent container. */
  runtime: 'runsc' | 'runc';
  /** Why this one, in plain words (logged at start, shown by /health and the doctor). */
  reason: string;
  /** Under runc: how to get runsc. */
  hint?: string;
  /** The engine did not answer: decided for now, asked again next time. */
  provisional?: boolean;
}

export const RUNSC_ARGS = ['--platform=ptrace', '--network=none', '--host-uds=all'];
export const RUNSC_HINT = `install gVisor from Debian's bookworm-backports (apt-get install -t bookworm-backports runsc; bookworm's own 2022 release is too old), add {"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":${JSON.stringify(RUNSC_ARGS)}}}} to /etc/docker/daemon.json, then reload Docker (systemctl reload docker) and restart Carapace`;

/**
 * Tries runsc once in a throwaway container of the agent image: null when what agents do
 * works, else what failed. (gVisor's 2022 release refuses the statx calls of the image's
 * coreutils: `ls` and `stat` fail in the agent's shell.)
 */
export type SandboxProbe = () => Promise<string | null>;

/** The runtime for agents under `setting`, from what the engine lists and the probe finds. */
export async function chooseSandbox(docker: Pick<Docker, 'info'>, setting: SandboxSetting, probe: SandboxProbe): Promise<Sandbox> {
  if (setting === 'runc') return { runtime: 'runc', reason: 'agents.runtime is "runc" in carapace.json', hint: RUNSC_HINT };
  let info: { Runtimes?: Record<string, { path?: string; runtimeArgs?: string[] }> };
  try {
    info = (await docker.info()) as typeof info;
  } catch (err) {
    // The core still starts (the doctor says what is wrong); no agent can start meanwhile.
    return { runtime: 'runc', reason: `the Docker engine did not answer (${(err as Error).message})`, provisional: true };
  }
  const runsc = info.Runtimes?.runsc;
  let problem = !runsc ? 'the Docker engine has no runsc runtime' : !(runsc.runtimeArgs ?? []).includes('--host-uds=all') ? 'runsc is registered without --host-uds=all, so agents could not reach their sockets' : null;
  if (!problem) {
    const failed = await probe();
    if (failed) problem = `runsc is too old for the agent's tools (${failed})`;
  }
  if (!problem) return { runtime: 'runsc', reason: 'gVisor (runsc) is registered with the engine' };
  if (setting === 'runsc') throw new StartupError('CONFIG_INVALID', `agents.runtime is "runsc" but ${problem}: ${RUNSC_HINT}`);
  return { runtime: 'runc', reason: problem, hint: RUNSC_HINT };
}
