// `make token` right after `docker compose up -d` (issue 32 §4): the core's container may
// still be starting and the core may not have written the admin token yet; it used to fail
// at once with "no admin token yet: start the core once". The real Makefile and the real
// CLI (dist/core/src/admin/cli.js) with a stand-in `docker` whose `compose exec` fails while
// the container starts and then runs the command here, on a data folder of the test's own,
// where "the core" writes the token a moment later.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../harness.js';

const TOKEN = 'made-on-first-start-0123456789abcdef';
let dir = '';
let data = '';
let docker = '';

/**
 * A docker client that has `compose`: `ps -q core` lists the container; `exec` fails its
 * first `failures` calls (the container is starting), then runs the command here.
 */
function standIn(failures: number): void {
  writeFileSync(join(dir, 'execs'), '0');
  writeFileSync(
    docker,
    `#!/bin/bash
[ "$1" = compose ] || exit 1
shift
case "$1" in
  version) echo 'Docker Compose version v2.stand-in'; exit 0 ;;
  ps) echo 0123456789ab; exit 0 ;;
  exec)
    n=$(( $(cat '${dir}/execs') + 1 )); echo $n > '${dir}/execs'
    [ $n -le ${failures} ] && { echo 'Error response from daemon: container is restarting' >&2; exit 1; }
    shift; env=()
    while [ $# -gt 0 ]; do case "$1" in -T) shift ;; -e) env+=("$2"); shift 2 ;; *) break ;; esac; done
    shift # the service
    [ "$1" = node ] && set -- node '${ROOT}'/"\${@:2}"
    exec env CARAPACE_DATA_DIR='${data}' "\${env[@]}" "$@" ;;
esac
exit 1
`,
  );
  chmodSync(docker, 0o755);
}

function make(args: string[]): Promise<{ status: number | null; out: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('make', ['--no-print-directory', ...args, `DOCKER=${docker}`], { cwd: dir, env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (status) => resolve({ status, out, ms: Date.now() - started }));
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-make-token-'));
  data = join(dir, 'data');
  docker = join(dir, 'docker');
  mkdirSync(data);
  copyFileSync(join(ROOT, 'Makefile'), join(dir, 'Makefile'));
  copyFileSync(join(ROOT, 'compose.yaml'), join(dir, 'compose.yaml'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('make token right after docker compose up -d', () => {
  it('waits for the container to start and for the core to write the token, then prints it', async () => {
    rmSync(join(data, 'admin-token'), { force: true });
    standIn(2);
    // The core writes it 3 s from now (its first start).
    setTimeout(() => writeFileSync(join(data, 'admin-token'), `${TOKEN}\n`, { mode: 0o600 }), 3000);
    const r = await make(['token', 'TOKEN_WAIT_S=20']);
    expect(r.out.trim()).toBe(TOKEN);
    expect(r.status).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(2500);
  }, 30_000);

  it('a token that never comes: the same error as before, once the wait is over', async () => {
    rmSync(join(data, 'admin-token'), { force: true });
    standIn(0);
    const r = await make(['token', 'TOKEN_WAIT_S=2']);
    expect(r.status).not.toBe(0);
    expect(r.out).toContain('carapace: no admin token yet: start the core once (docker compose up -d), then ask again');
    expect(r.ms).toBeGreaterThanOrEqual(1800);
    expect(r.ms).toBeLessThan(15_000);
  }, 30_000);
});
