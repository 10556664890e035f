// The OCI runtimes the engine offers, as the Docker benchmarks measure them: runc, and
// runsc when it is registered.
import { execFileSync } from 'node:child_process';

export type Runtime = 'runc' | 'runsc';

export function engineRuntimes(docker: string): Runtime[] {
  const registered = execFileSync(docker, ['info', '--format', '{{json .Runtimes}}'], { encoding: 'utf8' });
  return registered.includes('"runsc"') ? ['runc', 'runsc'] : ['runc'];
}
