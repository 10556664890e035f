// The core's scheduled backups, in its own process (no Docker: a core run by hand, the
// tests): the daily time, a backup made by the schedule's runner into the folder with only
// the newest `keep` scheduled archives left (a person's own never removed), each outcome
// audited once whoever made it (a failed one with its code), and what the Checks page says.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../src/audit/audit-log.js';
import { inProcessRunner } from '../../src/backup/runner.js';
import { BackupSchedule, nextDaily } from '../../src/backup/schedule.js';
import { readStatus } from '../../src/backup/status.js';
import { backupCheck } from '../../src/doctor/checks.js';
import { ROOT } from '../harness.js';

let dir: string;
let audit: AuditLog;
const volumes = () => ({ config: join(dir, 'v', 'config'), data: join(dir, 'v', 'data'), logs: join(dir, 'v', 'logs'), groups: join(dir, 'v', 'groups') });
const backupEntries = () => audit.query({}).filter((e) => e.source === 'backup');

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cp-backup-schedule-'));
  for (const area of Object.values(volumes())) mkdirSync(area, { recursive: true });
  writeFileSync(join(volumes().config, 'carapace.json'), '{}');
  const db = new Database(join(volumes().data, 'usage.sqlite'));
  db.exec('CREATE TABLE t (x)');
  db.close();
  audit = new AuditLog(join(dir, 'audit.jsonl'), (t) => t);
});

afterAll(async () => {
  await audit.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the daily time', () => {
  it('is the next HH:MM in UTC: later today, or tomorrow once it has passed', () => {
    const now = Date.parse('2026-03-10T02:00:00Z');
    expect(new Date(nextDaily('03:30', now)).toISOString()).toBe('2026-03-10T03:30:00.000Z');
    expect(new Date(nextDaily('01:15', now)).toISOString()).toBe('2026-03-11T01:15:00.000Z');
    expect(new Date(nextDaily('02:00', now)).toISOString()).toBe('2026-03-11T02:00:00.000Z');
  });
});

describe('scheduled backups in the core\'s process', () => {
  const out = () => join(dir, 'backups');

  it('each run makes an archive; only the newest `keep` scheduled ones stay, a person\'s own stays; each outcome audited once', async () => {
    mkdirSync(out(), { recursive: true });
    writeFileSync(join(out(), 'carapace-2020-01-01-000000.tar.gz'), 'a person\'s own, older than all');
    const schedule = new BackupSchedule({ settings: { schedule: 'daily', at: '03:30', keep: 2 }, dir: out(), dataDir: volumes().data, run: inProcessRunner({ volumes: volumes(), outDir: out(), keep: 2, passphrase: undefined }, null), audit });
    for (let i = 0; i < 3; i++) {
      await schedule.runNow();
      await new Promise((r) => setTimeout(r, 1100)); // archives are named by the second
    }
    const names = readdirSync(out()).filter((n) => !n.startsWith('.')).sort();
    expect(names.filter((n) => n.endsWith('-scheduled.tar.gz'))).toHaveLength(2);
    expect(names).toContain('carapace-2020-01-01-000000.tar.gz');
    const entries = backupEntries();
    expect(entries).toHaveLength(3);
    expect(entries[2]).toMatchObject({ stage: 'core', outcome: 'ok', reason: expect.stringMatching(/^backup made \(scheduled\): .*-scheduled\.tar\.gz, \d+ files, [\d.]+ MB, [\d.]+ s$/) });
    schedule.check(); // nothing new: not audited again
    expect(backupEntries()).toHaveLength(3);
    const view = schedule.view();
    expect(view).toMatchObject({ schedule: 'daily', keep: 2, last: { ok: true, kind: 'scheduled' } });
    expect(backupCheck(view)).toMatchObject({ id: 'backups', status: 'ok' });
  }, 30_000);

  it('a backup a person made (the CLI, another process) is audited when the core next looks', async () => {
    const schedule = new BackupSchedule({ settings: { schedule: 'off', at: '03:30', keep: 7 }, dir: out(), dataDir: volumes().data, run: async () => undefined, audit });
    const made = await new Promise<string>((resolve) => execFile(process.execPath, [join(ROOT, 'dist/core/src/backup/cli.js'), 'create', '--volumes', join(dir, 'v'), '--out', out()], (_e, stdout) => resolve(stdout)));
    schedule.check();
    const last = backupEntries().at(-1)!;
    expect(last.reason).toBe(`backup made (manual): ${made.trim().split('\n').at(-1)}, ${readStatus(volumes().data).last!.files} files, ${last.reason!.match(/, ([\d.]+ MB),/)![1]}, ${((readStatus(volumes().data).last!.duration_ms ?? 0) / 1000).toFixed(1)} s`);
  }, 30_000);

  it('a failed one is audited with its code and fails the Checks entry, saying when the last good one was', async () => {
    const blocked = join(dir, 'not-a-folder');
    writeFileSync(blocked, 'a file where the backups folder should be');
    const schedule = new BackupSchedule({ settings: { schedule: 'daily', at: '03:30', keep: 7 }, dir: blocked, dataDir: volumes().data, run: inProcessRunner({ volumes: volumes(), outDir: blocked, keep: 7, passphrase: undefined }, null), audit });
    await schedule.runNow();
    expect(backupEntries().at(-1)).toMatchObject({ outcome: 'error', code: 'BACKUP_FAILED', reason: expect.stringContaining('backup failed (scheduled): the backup could not be made') });
    const check = backupCheck(schedule.view());
    expect(check.status).toBe('fail');
    expect(check.detail).toContain('The last backup (scheduled');
    expect(check.detail).toContain('The last one that worked:');
  }, 30_000);

  it('a workspace held as an ext4 image with no engine to read it through fails clearly, not silently without it', async () => {
    writeFileSync(join(volumes().groups, 'family.img'), Buffer.alloc(1024));
    const schedule = new BackupSchedule({ settings: { schedule: 'daily', at: '03:30', keep: 7 }, dir: out(), dataDir: volumes().data, run: inProcessRunner({ volumes: volumes(), outDir: out(), keep: 7, passphrase: undefined }, null), audit });
    await schedule.runNow();
    rmSync(join(volumes().groups, 'family.img'));
    expect(backupEntries().at(-1)).toMatchObject({ outcome: 'error', code: 'BACKUP_WORKSPACE_UNREADABLE', reason: expect.stringContaining('the workspace of group "family" is an ext4 image') });
  });
});
