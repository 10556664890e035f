// Activity after a restart or an upgrade: the audit log starts with the newest entries its
// files already hold, the rotated ones too, in order, bounded, skipping what is not an entry.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../src/audit/audit-log.js';
import { readAuditHistory } from '../../src/audit/audit-history.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cp-history-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const line = (n: number, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ level: 'info', timestamp: `2026-11-2${Math.floor(n / 100)}T10:00:${String(n % 60).padStart(2, '0')}.000Z`, group: 'main', session: null, source: 'core', topic: null, correlation: `c${n}`, stage: 'core', outcome: 'ok', reason: `entry ${n}`, ...extra });

describe('the audit history', () => {
  it('is in the window of a new log: rotated files first, oldest first, what is not an entry skipped', async () => {
    const file = join(dir, 'audit.jsonl');
    // audit.jsonl.2 is the oldest rotation, .1 the newer one (by their times, whatever their numbers).
    writeFileSync(`${file}.2`, `${line(1)}\n${line(2)}\n`);
    writeFileSync(`${file}.1`, `${line(3)}\nnot json at all\n{"timestamp":"x"}\n${line(4, { code: 'RATE_LIMITED', outcome: 'rejected' })}\n`);
    writeFileSync(file, `${line(5)}\n{"level":"info","timestamp":"2026-11-2`);
    utimesSync(`${file}.2`, new Date('2026-11-20'), new Date('2026-11-20'));
    utimesSync(`${file}.1`, new Date('2026-11-21'), new Date('2026-11-21'));
    const audit = new AuditLog(file, (t) => t);
    try {
      audit.record({ group: 'main', session: null, source: 'core', topic: null, correlation: 'now', stage: 'core', outcome: 'ok', reason: 'after the restart' });
      expect(audit.query({}).map((e) => e.correlation)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5', 'now']);
      expect(audit.query({ correlation: 'c4' })[0]).toMatchObject({ code: 'RATE_LIMITED', outcome: 'rejected', reason: 'entry 4' });
      expect(audit.query({ correlation: 'c4' })[0]).not.toHaveProperty('level');
    } finally {
      await audit.close();
    }
  });

  it('keeps only the newest entries, within its byte bound', () => {
    const file = join(dir, 'audit.jsonl');
    writeFileSync(file, `${Array.from({ length: 1000 }, (_, i) => line(i % 100)).join('\n')}\n`);
    expect(readAuditHistory(file, 10)).toHaveLength(10);
    const bounded = readAuditHistory(file, 1000, 2000);
    expect(bounded.length).toBeGreaterThan(0);
    expect(bounded.length).toBeLessThan(20);
  });
});
