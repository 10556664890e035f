// The repeat summariser alone: keyed on what the core decided, bounded in memory.
import { describe, expect, it } from '@jest/globals';
import type { AuditInput } from '../../src/audit/audit-log.js';
import { RepeatSummariser } from '../../src/audit/repeat-summary.js';

const key = (session: string, code = 'UNKNOWN_TOOL') => ({ group: 'g', session, stage: 'topic' as const, code });

describe('RepeatSummariser', () => {
  it('writes the first of a burst, counts the rest whatever their topic, and summarises when the window closes', () => {
    const out: AuditInput[] = [];
    const s = new RepeatSummariser(10_000, 100, (e) => out.push(e));
    expect(s.admit(key('s1'), 'tool.invoke.a', 0)).toBe(true);
    for (let i = 0; i < 99; i++) expect(s.admit(key('s1'), `tool.invoke.${i}${'x'.repeat(100)}`, 1 + i)).toBe(false);
    s.sweep(false, 9_999);
    expect(out).toHaveLength(0);
    s.sweep(false, 10_000);
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ session: 's1', stage: 'topic', code: 'UNKNOWN_TOOL', outcome: 'rejected', repeats: 99, reason: '99 more like this in 10 s' });
    expect(out[0].samples).toHaveLength(5);
    for (const sample of out[0].samples!) expect(sample.length).toBeLessThanOrEqual(64);
    // The next one opens a new burst, written whole.
    expect(s.admit(key('s1'), 'tool.invoke.b', 10_001)).toBe(true);
    s.sweep(true);
    expect(out).toHaveLength(1); // a burst of one needs no summary
  });

  it('keeps at most maxBursts bursts; beyond, sessions fold into one burst per stage and code', () => {
    const out: AuditInput[] = [];
    const s = new RepeatSummariser(10_000, 3, (e) => out.push(e));
    for (let i = 0; i < 1000; i++) for (let j = 0; j < 3; j++) s.admit(key(`s${i}`), 't', 0);
    expect(s.open).toBeLessThanOrEqual(4);
    s.sweep(true);
    const folded = out.find((e) => e.session === null);
    expect(folded?.repeats).toBe(997 * 3 - 1);
    expect(s.open).toBe(0);
  });
});
