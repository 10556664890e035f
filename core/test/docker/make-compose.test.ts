// `make up / down / ps / token / doctor` on whatever Compose the machine has: Compose v2
// (`$(DOCKER) compose`) when the docker client has the plugin, else docker-compose v1 (as
// Debian packages it, with Debian's docker client that has no `compose`), and with neither,
// one line saying so and how to get one. An empty folder with only the Makefile and
// compose.yaml, as on a fresh clone; nothing is started (`ps` only, and exec into a core
// that is not running).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../harness.js';

/** Debian's docker client (20.10): no compose plugin. */
const DEBIAN_DOCKER = '/usr/bin/docker';
const MISSING = /neither `docker compose` \(Compose v2\) nor `docker-compose` was found.*(compose plugin|apt-get install docker-compose)/;

let dir = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-make-compose-'));
  copyFileSync(join(ROOT, 'Makefile'), join(dir, 'Makefile'));
  copyFileSync(join(ROOT, 'compose.yaml'), join(dir, 'compose.yaml'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function make(args: string[], env: NodeJS.ProcessEnv = process.env): { status: number | null; out: string } {
  const r = spawnSync('make', ['--no-print-directory', ...args], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Where a command is on this PATH, as the shell finds it. */
function which(cmd: string, path = process.env.PATH): string | null {
  const r = spawnSync('bash', ['-c', `command -v ${cmd}`], { env: { PATH: path }, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

describe('with docker-compose (v1) and a docker client without `compose`', () => {
  beforeAll(() => {
    expect(spawnSync(DEBIAN_DOCKER, ['compose', 'version']).status).not.toBe(0);
    expect(which('docker-compose')).not.toBeNull();
  });

  it('`make ps` runs docker-compose ps: exit 0 and its table', () => {
    const r = make(['ps', `DOCKER=${DEBIAN_DOCKER}`]);
    expect(r.out).not.toMatch(/not a docker command|unknown command/);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/Name\s+Command\s+State\s+Ports|NAME\s+IMAGE\s+COMMAND/);
  }, 60_000);

  it('`make doctor` and `make token` with no core running say so, and how to start it', () => {
    for (const target of ['doctor', 'token']) {
      const r = make([target, `DOCKER=${DEBIAN_DOCKER}`]);
      expect(r.status).not.toBe(0);
      expect(r.out).toContain('carapace: the core is not running: start it with `docker-compose up -d`; see `docker-compose logs core`');
    }
  }, 60_000);
});

describe('with a docker client that has `compose` (v2)', () => {
  it('uses `$(DOCKER) compose`, not docker-compose', () => {
    const stub = join(dir, 'docker-v2');
    writeFileSync(stub, '#!/bin/bash\nif [ "$1" = compose ]; then shift; echo "compose v2: $*"; exit 0; fi\nexit 1\n');
    chmodSync(stub, 0o755);
    const r = make(['ps', `DOCKER=${stub}`]);
    expect(r.status).toBe(0);
    expect(r.out).toContain('compose v2: ps');
    expect(r.out).not.toContain('docker-compose');
  });
});

describe('with neither', () => {
  let path = '';

  beforeAll(() => {
    // Only what the recipes need: the shells, make, env and the docker client.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    for (const cmd of ['bash', 'sh', 'make', 'env']) {
      const at = which(cmd);
      if (!at) throw new Error(`${cmd} is not on PATH`);
      symlinkSync(at, join(bin, cmd));
    }
    expect(existsSync(DEBIAN_DOCKER)).toBe(true);
    symlinkSync(DEBIAN_DOCKER, join(bin, 'docker'));
    path = bin;
    expect(which('docker-compose', path)).toBeNull();
  });

  for (const target of ['token', 'ps', 'up', 'down', 'doctor']) {
    it(`\`make ${target}\` fails with one line naming both and how to get one`, () => {
      const r = make([target, `DOCKER=${DEBIAN_DOCKER}`], { PATH: path, HOME: dir });
      expect(r.status).not.toBe(0);
      expect(r.out).toMatch(MISSING);
      expect(r.out.trim().split('\n')).toHaveLength(1);
      expect(r.out).not.toMatch(/not a docker command|unknown command|No such file/);
    });
  }
});
