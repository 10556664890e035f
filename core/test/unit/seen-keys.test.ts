import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SeenKeys } from '../../src/bus/seen-keys.js';
import type { StoreProblem } from '../../src/state/sqlite-file.js';

describe('SeenKeys', () => {
  it('knows a key once added, and forgets the oldest beyond its capacity', () => {
    const seen = new SeenKeys(2);
    expect(seen.has('a')).toBe(false);
    for (const key of ['a', 'a', 'b', 'c']) seen.add(key);
    expect(['a', 'b', 'c'].map((k) => seen.has(k))).toEqual([false, true, true]); // the bound holds whatever a plugin sends
  });

  it('a core that restarts still knows the newest keys of the last run, within the bound', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'seen-keys-')), 'event-keys.sqlite');
    const first = new SeenKeys(3, file);
    for (const key of ['a', 'b', 'c', 'd']) first.add(key);
    first.close(); // a kill -9 leaves the same rows: each add is its own committed write
    const second = new SeenKeys(3, file);
    expect(['a', 'b', 'c', 'd'].map((k) => second.has(k))).toEqual([false, true, true, true]);
    second.add('e');
    expect(second.has('b')).toBe(false);
    second.close();
  });

  it('an unreadable file is moved aside, said, and a fresh one used', () => {
    const dir = mkdtempSync(join(tmpdir(), 'seen-keys-'));
    const file = join(dir, 'event-keys.sqlite');
    writeFileSync(file, 'not a database at all, just bytes '.repeat(200));
    const problems: StoreProblem[] = [];
    const seen = new SeenKeys(10, file, (p) => problems.push(p));
    expect(problems).toHaveLength(1);
    seen.add('a');
    seen.close();
    expect(new SeenKeys(10, file).has('a')).toBe(true);
    expect(readdirSync(dir).filter((f) => f.includes('corrupt'))).toHaveLength(1);
  });
});
