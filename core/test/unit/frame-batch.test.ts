import { describe, expect, it } from '@jest/globals';
import { FrameBatch, parseFrames } from '../../src/boundary/frame-batch.js';
import { atTurnEnd } from '../../src/boundary/turn-end.js';

const m = (n: number): string => JSON.stringify({ n });

describe('FrameBatch', () => {
  it('sends the messages of one event-loop turn as one frame, a JSON array in order; a message alone as itself', async () => {
    const sent: string[] = [];
    const batch = new FrameBatch(async (frame) => void sent.push(frame));
    await Promise.all([batch.push(m(1)), batch.push(m(2)), batch.push(m(3))]);
    await batch.push(m(4));
    expect(sent).toEqual(['[{"n":1},{"n":2},{"n":3}]', '{"n":4}']);
    expect(parseFrames(sent.map((f) => Buffer.from(f)))).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
  });

  it('rejects every message of a batch whose send failed, and recovers for the next', async () => {
    let fail = true;
    const sent: string[] = [];
    const batch = new FrameBatch(async (frame) => {
      if (fail) throw new Error('peer gone');
      sent.push(frame);
    });
    const first = [batch.push(m(1)), batch.push(m(2))];
    await expect(Promise.all(first)).rejects.toThrow('peer gone');
    await expect(first[1]).rejects.toThrow('peer gone');
    fail = false;
    await batch.push(m(3));
    expect(sent).toEqual(['{"n":3}']);
  });
});

describe('parseFrames', () => {
  it('takes each frame as one message or an array of them, and skips a frame that is not JSON', () => {
    const frames = ['{"t":"hello"}', 'not json', '[{"t":"a"},{"t":"b"}]'].map((f) => Buffer.from(f));
    expect(parseFrames(frames)).toEqual([{ t: 'hello' }, { t: 'a' }, { t: 'b' }]);
  });
});

describe('atTurnEnd', () => {
  it('runs a turn\'s sends, then its writes, at the end of that same turn', async () => {
    const ran: string[] = [];
    atTurnEnd('write', () => ran.push('audit lines'));
    const batch = new FrameBatch(async (frame) => void ran.push(`sent ${frame}`));
    void batch.push(m(1));
    setImmediate(() => ran.push('next immediate'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ran).toEqual(['sent {"n":1}', 'audit lines', 'next immediate']);
  });
});
