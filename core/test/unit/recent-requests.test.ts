import { describe, expect, it } from '@jest/globals';
import { RecentRequests } from '../../src/pipeline/recent-requests.js';

describe('RecentRequests', () => {
  it('returns the first answer for a repeat within the window, nothing after it', async () => {
    const recent = new RecentRequests<string>(1000, 10);
    recent.set('s c1', Promise.resolve('first'));
    recent.weigh('s c1', 10, 0);
    await expect(recent.get('s c1', 500)).resolves.toBe('first');
    expect(recent.get('s c1', 1001)).toBeUndefined();
    expect(recent.get('s c2', 0)).toBeUndefined();
  });

  it('keeps at most `capacity` entries, dropping the oldest', () => {
    const recent = new RecentRequests<number>(60_000, 3);
    for (let i = 0; i < 5; i++) {
      recent.set(`k${i}`, Promise.resolve(i));
      recent.weigh(`k${i}`, 1, i);
    }
    expect(recent.get('k0', 5)).toBeUndefined();
    expect(recent.get('k1', 5)).toBeUndefined();
    expect(recent.get('k4', 5)).toBeDefined();
  });

  it('keeps at most `maxBytes` of answers, dropping the oldest once they are weighed', () => {
    const recent = new RecentRequests<number>(60_000, 100, 1000);
    for (let i = 0; i < 4; i++) {
      recent.set(`k${i}`, Promise.resolve(i));
      recent.weigh(`k${i}`, 400, i);
    }
    expect(recent.get('k0', 5)).toBeUndefined();
    expect(recent.get('k1', 5)).toBeUndefined();
    expect(recent.get('k2', 5)).toBeDefined();
    expect(recent.get('k3', 5)).toBeDefined();
  });

  it('frees the bytes of expired entries', () => {
    const recent = new RecentRequests<number>(10, 100, 1000);
    recent.set('old', Promise.resolve(0));
    recent.weigh('old', 900, 0);
    expect(recent.get('old', 20)).toBeUndefined();
    recent.set('new', Promise.resolve(1));
    recent.weigh('new', 900, 20);
    expect(recent.get('new', 21)).toBeDefined();
  });

  it('never forgets a request still waiting for its answer; the window starts when it is answered', async () => {
    // A call waiting minutes for a person is resent by ipc after a reconnect: it must join.
    const recent = new RecentRequests<string>(1000, 10);
    recent.set('s c1', Promise.resolve('once'));
    await expect(recent.get('s c1', 60_000)).resolves.toBe('once');
    recent.weigh('s c1', 10, 60_000);
    await expect(recent.get('s c1', 60_900)).resolves.toBe('once');
    expect(recent.get('s c1', 61_001)).toBeUndefined();
  });
});
