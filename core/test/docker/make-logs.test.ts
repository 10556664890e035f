// `make logs` on a fresh clone: nothing built on the host (no dist/, no node_modules), the
// formatter runs in the core's image, and it keeps following audit.jsonl across a rotation.
import { afterEach, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, until } from '../harness.js';

const entry = (n: number): string =>
  JSON.stringify({ time: new Date().toISOString(), group: 'family', session: 'agent-1', source: 'agent-1', topic: 'tool.invoke.echo', correlation: `c${n}`, stage: 'response', outcome: 'ok', reason: `entry number ${n}` });

let make: ChildProcess | null = null;
let dir = '';

afterEach(() => {
  if (make?.pid) process.kill(-make.pid, 'SIGTERM'); // make, tail and docker run: one process group
  rmSync(dir, { recursive: true, force: true });
});

it('formats the audit log inside the core image and follows it across rotation', async () => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-make-logs-'));
  copyFileSync(join(ROOT, 'Makefile'), join(dir, 'Makefile'));
  mkdirSync(join(dir, 'volumes', 'logs'), { recursive: true });
  const log = join(dir, 'volumes', 'logs', 'audit.jsonl');
  writeFileSync(log, `${entry(1)}\n`);
  let out = '';
  make = spawn('make', ['-s', 'logs', `DOCKER=${process.env.DOCKER || 'docker'}`], { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  make.stdout!.on('data', (d: Buffer) => (out += d));
  make.stderr!.on('data', (d: Buffer) => (out += d));
  await until(() => out.includes('entry number 1'), 30_000);
  // Rotation as the audit log does it: rename, then a new file under the same name.
  renameSync(log, `${log}.1`);
  writeFileSync(log, `${entry(2)}\n`);
  appendFileSync(log, `${entry(3)}\n`);
  await until(() => out.includes('entry number 3'), 30_000);
  expect(out).toContain('entry number 2');
  expect(out).not.toContain('Cannot find module');
  expect(out).not.toContain('{"time"'); // formatted, not raw JSON
}, 90_000);
