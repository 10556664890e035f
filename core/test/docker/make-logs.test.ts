// `make logs` on a fresh clone: nothing built on the host (an empty folder with only the
// Makefile), the formatter runs in the core's image, and it keeps following audit.jsonl
// across the audit log's own rotations (rotating-file-stream, as the core writes it).
import { afterEach, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../src/audit/audit-log.js';
import { ROOT, sleep, until } from '../harness.js';

let make: ChildProcess | null = null;
let dir = '';

afterEach(() => {
  try {
    if (make?.pid) process.kill(-make.pid, 'SIGTERM'); // make, tail and docker run: one process group
  } catch {
    // already gone
  }
  rmSync(dir, { recursive: true, force: true });
});

async function recordMany(log: AuditLog, from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i++) {
    log.record({ group: 'g', session: 's', source: 's', topic: `tool.invoke.t${String(i).padStart(5, '0')}`, correlation: `c${i}`, stage: 'response', outcome: 'ok', reason: 'x'.repeat(100) });
    if (i % 20 === 19) await log.flush();
  }
  await log.flush();
}

it('formats the audit log inside the core image and follows it across rotations', async () => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-make-logs-'));
  copyFileSync(join(ROOT, 'Makefile'), join(dir, 'Makefile'));
  const logs = join(dir, 'volumes', 'logs');
  mkdirSync(logs, { recursive: true });
  const log = new AuditLog(join(logs, 'audit.jsonl'), (s) => s, 1000, { max_file_mb: 0.02, keep_files: 5, keep_days: 30, repeat_window_s: 10 });
  try {
    await recordMany(log, 0, 5);
    let out = '';
    make = spawn('make', ['-s', 'logs', `DOCKER=${process.env.DOCKER || 'docker'}`], { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    make.stdout!.on('data', (d: Buffer) => (out += d));
    make.stderr!.on('data', (d: Buffer) => (out += d));
    await until(() => out.includes('tool.invoke.t00004'), 30_000);
    // Two rotations or more, at the pace of a busy core rather than all in one instant.
    for (let from = 5; from < 205; from += 20) {
      await recordMany(log, from, 20);
      await sleep(150);
    }
    expect(readdirSync(logs).filter((n) => /^audit\.jsonl\.\d+$/.test(n)).length).toBeGreaterThanOrEqual(2);
    await until(() => out.includes('tool.invoke.t00204'), 30_000);
    for (let i = 0; i < 205; i++) expect(out).toContain(`tool.invoke.t${String(i).padStart(5, '0')}`);
    expect(out).not.toContain('Cannot find module');
    expect(out).not.toContain('{"level"'); // formatted, not raw JSON
  } finally {
    await log.close();
  }
}, 120_000);
