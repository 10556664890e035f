import { describe, expect, it } from '@jest/globals';
import { SeenKeys } from '../../src/bus/seen-keys.js';

describe('SeenKeys', () => {
  it('accepts a key once, and forgets the oldest beyond its capacity', () => {
    const seen = new SeenKeys(2);
    expect([seen.first('a'), seen.first('a'), seen.first('b'), seen.first('c')]).toEqual([true, false, true, true]);
    expect(seen.first('a')).toBe(true); // forgotten: the bound holds whatever a plugin sends
    expect(seen.first('c')).toBe(false);
  });
});
