import { describe, expect, it } from '@jest/globals';
import { formatEntry } from '../../src/audit/format.js';

describe('formatEntry', () => {
  it('shows time, group, topic, stage, outcome, code, reason and correlation on one line', () => {
    const line = JSON.stringify({
      timestamp: '2026-11-22T11:14:32.117Z', group: 'family', topic: 'tool.invoke.echo', stage: 'payload',
      outcome: 'rejected', code: 'VALIDATION_FAILED', reason: 'STAGE 3: bad', correlation: 'abcdef123456',
    });
    const out = formatEntry(line);
    expect(out).toMatch(/^11:14:32\.117 family\s+tool\.invoke\.echo\s+payload\s+rejected\s+VALIDATION_FAILED STAGE 3: bad \[abcdef12\]$/);
    expect(out).not.toContain('\n');
  });

  it('marks CRITICAL entries and passes non-JSON through unchanged', () => {
    expect(formatEntry(JSON.stringify({ severity: 'CRITICAL', outcome: 'error', source: 'p' }))).toContain('CRITICAL');
    expect(formatEntry('not json')).toBe('not json');
  });
});
