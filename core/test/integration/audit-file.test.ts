// The audit file on a real disk: it rotates at its size under a stable name, retention
// removes old files by count and by age, `make logs` (tail -F | pretty.js) follows it
// across a rotation, and a run after one that died mid-line starts on a fresh line.
import { afterEach, describe, expect, it } from '@jest/globals';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog, type AuditInput } from '../../src/audit/audit-log.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'cp-audit-'));
  dirs.push(d);
  return d;
}

const entry = (i: number): AuditInput => ({ group: 'g', session: 's', source: 's', topic: `tool.invoke.t${String(i).padStart(5, '0')}`, correlation: `c${i}`, stage: 'response', outcome: 'ok', reason: 'x'.repeat(100) });

/** Records n entries, one event-loop turn at a time in batches, and waits for the file. */
async function recordMany(log: AuditLog, from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i++) {
    log.record(entry(i));
    if (i % 20 === 19) await log.flush();
  }
  await log.flush();
}

const rotated = (dir: string): string[] => readdirSync(dir).filter((n) => /^audit\.jsonl\.\d+$/.test(n)).sort();

describe('rotation and retention', () => {
  it('rotates at the size, keeps the current name, and keeps at most keep_files old files', async () => {
    const dir = tempDir();
    const file = join(dir, 'audit.jsonl');
    const log = new AuditLog(file, (s) => s, 1000, { max_file_mb: 0.01, keep_files: 2, keep_days: 30, repeat_window_s: 10 });
    await recordMany(log, 0, 600); // ~150 KB through 10 KB files
    await log.close();
    expect(existsSync(file)).toBe(true);
    expect(rotated(dir)).toEqual(['audit.jsonl.1', 'audit.jsonl.2']);
    const kept: number[] = [];
    for (const name of ['audit.jsonl.2', 'audit.jsonl.1', 'audit.jsonl']) {
      const text = readFileSync(join(dir, name), 'utf8');
      if (text === '') continue; // the current file, just rotated
      // Each file holds whole lines only, and about the configured size (one batch over at most).
      expect(text.endsWith('\n')).toBe(true);
      expect(statSync(join(dir, name)).size).toBeLessThan(10 * 1024 + 20 * 300);
      for (const line of text.trim().split('\n')) kept.push(Number(JSON.parse(line).correlation.slice(1)));
    }
    // Oldest file first, the newest entries last, nothing missing in between.
    expect(kept.at(-1)).toBe(599);
    expect(kept).toEqual(kept.map((_, i) => kept[0] + i));
    expect(kept.length).toBeGreaterThan(60);
  });

  it('removes rotated files older than keep_days', async () => {
    const dir = tempDir();
    const file = join(dir, 'audit.jsonl');
    // Files an earlier run left: one old, one recent.
    writeFileSync(join(dir, 'audit.jsonl.3'), '{"old":true}\n');
    writeFileSync(join(dir, 'audit.jsonl.4'), '{"recent":true}\n');
    const old = (Date.now() - 3 * 86_400_000) / 1000;
    utimesSync(join(dir, 'audit.jsonl.3'), old, old);
    const log = new AuditLog(file, (s) => s, 1000, { max_file_mb: 0.01, keep_files: 10, keep_days: 2, repeat_window_s: 10 });
    await recordMany(log, 0, 10);
    await log.close();
    expect(existsSync(join(dir, 'audit.jsonl.3'))).toBe(false);
    expect(existsSync(join(dir, 'audit.jsonl.4'))).toBe(true);
  });
});

describe('a run after a truncated last line', () => {
  it('starts on a fresh line, so its first entry parses', async () => {
    const dir = tempDir();
    const file = join(dir, 'audit.jsonl');
    writeFileSync(file, '{"level":"info","timestamp":"2026-01-01T00:00:00.000Z","group":"g","sess');
    const log = new AuditLog(file, (s) => s);
    log.record(entry(1));
    await log.close();
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines[0]).toBe('{"level":"info","timestamp":"2026-01-01T00:00:00.000Z","group":"g","sess');
    expect(JSON.parse(lines[1]).correlation).toBe('c1');
  });
});
