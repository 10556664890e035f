// A JSON state file as an earlier run left it: what each plugin store and the standing
// approvals read at start.
import { describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJsonState } from '../../src/state/json-state.js';

const offset = (json: unknown): number => {
  const value = (json as { offset?: unknown }).offset;
  if (typeof value !== 'number') throw new Error('no offset');
  return value;
};

describe('readJsonState', () => {
  it('missing on a first run, loaded when whole, and a broken file kept aside, never replaced in silence', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-state-'));
    try {
      const file = join(dir, 'offset.json');
      expect(readJsonState(file, offset)).toEqual({ kind: 'missing' });
      writeFileSync(file, '{"offset":42}');
      expect(readJsonState(file, offset)).toEqual({ kind: 'loaded', value: 42 });
      for (const [text, error] of [['{"offset":4', /JSON/], ['{"offset":"x"}', /no offset/]] as const) {
        writeFileSync(file, text);
        const moved = readJsonState(file, offset);
        expect(moved).toMatchObject({ kind: 'moved', error: expect.stringMatching(error) });
        if (moved.kind !== 'moved') throw new Error('unreachable');
        expect(readFileSync(moved.movedAside, 'utf8')).toBe(text);
        expect(readJsonState(file, offset)).toEqual({ kind: 'missing' });
      }
      expect(readdirSync(dir).filter((n) => n.startsWith('offset.json.corrupt-'))).toHaveLength(2);
      // Not a file it can read at all: said, not taken for a first run.
      mkdirSync(join(dir, 'folder.json'));
      expect(() => readJsonState(join(dir, 'folder.json'), offset)).toThrow(/EISDIR/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
