import { describe, expect, it } from '@jest/globals';
import { FrameBatch } from '../../src/boundary/frame-batch.js';

const f = (s: string): Buffer => Buffer.from(s);

describe('FrameBatch', () => {
  it('sends the messages of one event-loop turn as one multipart message, in order', async () => {
    const sent: string[][] = [];
    const batch = new FrameBatch(async (frames) => void sent.push(frames.map(String)));
    await Promise.all([batch.push(f('a')), batch.push(f('b')), batch.push(f('c'))]);
    await batch.push(f('d'));
    expect(sent).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('rejects every message of a batch whose send failed, and recovers for the next', async () => {
    let fail = true;
    const sent: string[][] = [];
    const batch = new FrameBatch(async (frames) => {
      if (fail) throw new Error('peer gone');
      sent.push(frames.map(String));
    });
    const first = [batch.push(f('a')), batch.push(f('b'))];
    await expect(Promise.all(first)).rejects.toThrow('peer gone');
    await expect(first[1]).rejects.toThrow('peer gone');
    fail = false;
    await batch.push(f('c'));
    expect(sent).toEqual([['c']]);
  });
});
