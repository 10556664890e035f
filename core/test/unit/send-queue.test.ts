import { describe, expect, it } from '@jest/globals';
import { SendQueue, type Frame } from '../../src/boundary/send-queue.js';

describe('SendQueue', () => {
  it('hands a send to the socket within the call when none is in flight, and chains the rest in order', async () => {
    const calls: string[] = [];
    let release!: () => void;
    const queue = new SendQueue((frames: Frame[]) => {
      calls.push(String(frames[0]));
      // The first send waits (a peer slow to take it); the others complete at once.
      return calls.length === 1 ? new Promise<void>((r) => (release = r)) : Promise.resolve();
    });
    const first = queue.push(['a']);
    expect(calls).toEqual(['a']);
    const rest = [queue.push(['b']), queue.push(['c'])];
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(['a']); // one send in flight at a time
    release();
    await Promise.all([first, ...rest]);
    expect(calls).toEqual(['a', 'b', 'c']);
    void queue.push(['d']);
    expect(calls).toEqual(['a', 'b', 'c', 'd']);
  });

  it('turns a socket that throws into a rejected send, and goes on with the next', async () => {
    let closed = true;
    const sent: string[] = [];
    const throwing = new SendQueue((frames: Frame[]) => {
      if (closed) throw new Error('Socket is closed');
      sent.push(String(frames[0]));
      return Promise.resolve();
    });
    await expect(throwing.push(['x'])).rejects.toThrow('Socket is closed');
    closed = false;
    await throwing.push(['y']);
    expect(sent).toEqual(['y']);
  });
});
