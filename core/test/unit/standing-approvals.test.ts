// Standing approvals on a real file: exact matches only, expiry, revocation, and a restart
// that neither forgets a revoke nor resurrects an expired or unreadable one.
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_HOURS, MAX_PER_GROUP, StandingApprovals, type StandingApproval } from '../../src/confirm/standing-approvals.js';

const fileIn = (): string => join(mkdtempSync(join(tmpdir(), 'carapace-standing-')), 'standing-approvals.json');
const ARGS = { recipient: '42', body: 'The boiler is fixed', options: { silent: true, tags: ['a', 'b'] } };

describe('StandingApprovals', () => {
  it('matches only the exact tool, group and arguments (key order aside)', () => {
    const store = new StandingApprovals(null);
    const granted = store.grant({ group: 'family', tool: 'send_telegram', arguments: ARGS, hours: 1, by: 'test' }) as StandingApproval;
    expect(granted.id).toEqual(expect.any(String));
    const reordered = { options: { tags: ['a', 'b'], silent: true }, body: 'The boiler is fixed', recipient: '42' };
    expect(store.match('family', 'send_telegram', reordered)?.id).toBe(granted.id);
    expect(store.match('work', 'send_telegram', ARGS)).toBeNull();
    expect(store.match('family', 'send_email', ARGS)).toBeNull();
    expect(store.match('family', 'send_telegram', { ...ARGS, body: 'The boiler is fixed!' })).toBeNull();
    expect(store.match('family', 'send_telegram', { ...ARGS, options: { silent: true, tags: ['b', 'a'] } })).toBeNull();
    expect(store.match('family', 'send_telegram', { ...ARGS, extra: null })).toBeNull();
    const { options: _dropped, ...fewer } = ARGS;
    expect(store.match('family', 'send_telegram', fewer)).toBeNull();
  });

  it('covers at most uses_per_hour calls in any hour (1 unless said), counted across a restart', () => {
    const file = fileIn();
    let now = Date.parse('2026-11-24T03:00:00Z');
    const store = new StandingApprovals(file, undefined, undefined, () => now);
    const once = store.grant({ group: 'family', tool: 'create_bug_report', arguments: { title: 'x' }, hours: 24, by: 'test' }) as StandingApproval;
    expect(once.uses_per_hour).toBe(1);
    expect(store.use('family', 'create_bug_report', { title: 'x' })).toEqual({ used: expect.objectContaining({ id: once.id }) });
    // The same call ten times in ten seconds: none of them is covered.
    for (let i = 0; i < 10; i++) {
      now += 1000;
      expect(store.use('family', 'create_bug_report', { title: 'x' })).toEqual({ spent: expect.objectContaining({ id: once.id }) });
    }
    const thrice = store.grant({ group: 'family', tool: 'create_bug_report', arguments: { title: 'y' }, hours: 24, by: 'test', uses_per_hour: 3 }) as StandingApproval;
    const uses = Array.from({ length: 4 }, () => Object.keys(store.use('family', 'create_bug_report', { title: 'y' }) ?? {})[0]);
    expect(uses).toEqual(['used', 'used', 'used', 'spent']);
    expect(thrice.used_at).toHaveLength(3);
    // A restart does not give the uses back; an hour later there is one again.
    const again = new StandingApprovals(file, undefined, undefined, () => now);
    expect(Object.keys(again.use('family', 'create_bug_report', { title: 'x' }) ?? {})).toEqual(['spent']);
    now += 3600_000;
    expect(Object.keys(again.use('family', 'create_bug_report', { title: 'x' }) ?? {})).toEqual(['used']);
    expect(store.use('family', 'create_bug_report', { title: 'other' })).toBeNull();
    for (const bad of [0, 61, 1.5]) expect(store.grant({ group: 'family', tool: 't', arguments: {}, hours: 1, by: 'test', uses_per_hour: bad })).toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('expires (reported once), and a revoke holds', () => {
    let now = Date.parse('2026-11-24T03:00:00Z');
    const expired: string[] = [];
    const store = new StandingApprovals(null, undefined, (a) => expired.push(a.id), () => now);
    const short = store.grant({ group: 'family', tool: 't', arguments: { n: 1 }, hours: 1, by: 'test' }) as StandingApproval;
    const long = store.grant({ group: 'family', tool: 't', arguments: { n: 2 }, hours: 24, by: 'test' }) as StandingApproval;
    now += 3600_000 - 1;
    expect(store.match('family', 't', { n: 1 })?.id).toBe(short.id);
    now += 1;
    expect(store.match('family', 't', { n: 1 })).toBeNull();
    expect(store.list()).toHaveLength(1);
    expect(expired).toEqual([short.id]);
    expect(store.revoke(long.id)?.id).toBe(long.id);
    expect(store.match('family', 't', { n: 2 })).toBeNull();
    expect(store.revoke(long.id)).toBeNull();
  });

  it('persists across a restart: a revoked or expired one does not come back', () => {
    const file = fileIn();
    let now = Date.now();
    const first = new StandingApprovals(file, undefined, undefined, () => now);
    const kept = first.grant({ group: 'family', tool: 't', arguments: { n: 1 }, hours: 48, by: 'test' }) as StandingApproval;
    const revoked = first.grant({ group: 'family', tool: 't', arguments: { n: 2 }, hours: 48, by: 'test' }) as StandingApproval;
    first.grant({ group: 'family', tool: 't', arguments: { n: 3 }, hours: 1, by: 'test' });
    first.revoke(revoked.id);
    now += 2 * 3600_000;
    const second = new StandingApprovals(file, undefined, undefined, () => now);
    expect(second.list().map((a) => a.id)).toEqual([kept.id]);
  });

  it('an unreadable file is moved aside, loudly, and nothing is approved', () => {
    const file = fileIn();
    writeFileSync(file, '{"approvals": [ {"id": "x", "group": "family", "tool": "t"');
    const problems: string[] = [];
    const store = new StandingApprovals(file, (p) => problems.push(p.error));
    expect(problems).toHaveLength(1);
    expect(readdirSync(join(file, '..')).some((f) => f.startsWith('standing-approvals.json.corrupt-'))).toBe(true);
    expect(store.list()).toEqual([]);
  });

  it('is bounded: at most MAX_HOURS long and MAX_PER_GROUP per group', () => {
    const store = new StandingApprovals(null);
    for (const hours of [0, -1, MAX_HOURS + 1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(store.grant({ group: 'g', tool: 't', arguments: {}, hours, by: 'test' })).toMatchObject({ code: 'INVALID_INPUT' });
    }
    for (let i = 0; i < MAX_PER_GROUP; i++) expect(store.grant({ group: 'g', tool: 't', arguments: { i }, hours: 1, by: 'test' })).toHaveProperty('id');
    expect(store.grant({ group: 'g', tool: 't', arguments: { i: -1 }, hours: 1, by: 'test' })).toMatchObject({ code: 'LIMIT' });
    expect(store.grant({ group: 'other', tool: 't', arguments: {}, hours: MAX_HOURS, by: 'test' })).toHaveProperty('id');
  });
});
