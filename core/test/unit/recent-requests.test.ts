import { describe, expect, it } from '@jest/globals';
import { RecentRequests } from '../../src/pipeline/recent-requests.js';

describe('RecentRequests', () => {
  it('returns the first answer for a repeat within the window, nothing after it', async () => {
    const recent = new RecentRequests<string>(1000, 10);
    recent.set('s c1', Promise.resolve('first'), 0);
    await expect(recent.get('s c1', 500)).resolves.toBe('first');
    expect(recent.get('s c1', 1001)).toBeUndefined();
    expect(recent.get('s c2', 0)).toBeUndefined();
  });

  it('keeps at most `capacity` entries, dropping the oldest', () => {
    const recent = new RecentRequests<number>(60_000, 3);
    for (let i = 0; i < 5; i++) recent.set(`k${i}`, Promise.resolve(i), i);
    expect(recent.get('k0', 5)).toBeUndefined();
    expect(recent.get('k1', 5)).toBeUndefined();
    expect(recent.get('k4', 5)).toBeDefined();
  });
});
