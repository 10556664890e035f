import { describe, expect, it } from '@jest/globals';
import { batchPrompt, TurnQueue, type QueuedTurn, type TurnOutcome } from '../../src/agents/turn-queue.js';
import type { EventEnvelope } from '../../src/protocol/envelope.js';

const event = (topic: string, id: string): EventEnvelope => ({ id, version: '1', timestamp: '', topic, source: 'telegram', group: 'g', payload: {} }) as unknown as EventEnvelope;
const message = (text: string): QueuedTurn => ({ prompt: text, cause: event('message.inbound', text) });
const task = (text: string): QueuedTurn => ({ prompt: text, cause: event('task.triggered', text) });

/** A queue whose turns finish when the test says; what each turn was given. */
function harness(options: { maxBatch?: number; maxWaiting?: number; now?: () => number } = {}) {
  const turns: string[][] = [];
  const finish: Array<() => void> = [];
  const overflows: Array<{ turn: string; waiting: number }> = [];
  const queue = new TurnQueue({
    maxBatch: options.maxBatch ?? 20,
    maxWaiting: options.maxWaiting ?? 200,
    now: options.now,
    run: (_group, batch) => new Promise<TurnOutcome>((resolve) => {
      turns.push(batch.map((t) => t.prompt));
      finish.push(() => resolve({ ok: true, output: batch.map((t) => t.prompt).join('+') }));
    }),
    overflowed: (_group, turn, waiting) => overflows.push({ turn: turn.prompt, waiting }),
  });
  const tick = () => new Promise((r) => setImmediate(r));
  return { queue, turns, finish, overflows, tick };
}

describe('the turn queue', () => {
  it('runs one turn at a time; messages that wait meanwhile share the next turn, at most maxBatch of them, in order', async () => {
    const { queue, turns, finish, tick } = harness({ maxBatch: 3 });
    const outcomes = ['a', 'b', 'c', 'd', 'e', 'f'].map((t) => queue.enqueue('g', message(t)));
    await tick();
    expect(turns).toEqual([['a']]);
    finish[0]();
    await tick();
    expect(turns).toEqual([['a'], ['b', 'c', 'd']]);
    finish[1]();
    await tick();
    expect(turns).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f']]);
    finish[2]();
    expect((await Promise.all(outcomes)).map((o) => o.output)).toEqual(['a', 'b+c+d', 'b+c+d', 'b+c+d', 'e+f', 'e+f']);
  });

  it('a scheduled task has a turn of its own, in its place', async () => {
    const { queue, turns, finish, tick } = harness();
    void queue.enqueue('g', message('a'));
    void queue.enqueue('g', message('b'));
    void queue.enqueue('g', task('T'));
    void queue.enqueue('g', message('c'));
    for (let i = 0; i < 4; i++) {
      await tick();
      finish[i]?.();
    }
    await tick();
    expect(turns).toEqual([['a'], ['b'], ['T'], ['c']]);
  });

  it('groups do not wait for each other', async () => {
    const { queue, turns, tick } = harness();
    void queue.enqueue('g', message('a'));
    void queue.enqueue('h', message('b'));
    await tick();
    expect(turns).toEqual([['a'], ['b']]);
  });

  it('while the budget is spent, turns wait, then run together when it renews', async () => {
    let now = 1_000_000;
    const { queue, turns, finish } = harness({ now: () => now });
    queue.holdUntil('g', now + 60);
    void queue.enqueue('g', message('a'));
    void queue.enqueue('g', message('b'));
    await new Promise((r) => setTimeout(r, 20));
    expect(turns).toEqual([]);
    now += 60;
    await new Promise((r) => setTimeout(r, 80));
    expect(turns).toEqual([['a', 'b']]);
    finish[0]();
  });

  it('at most maxWaiting wait: the rest are refused at once, and the person is told once per overflow', async () => {
    const { queue, finish, overflows, tick } = harness({ maxWaiting: 2 });
    void queue.enqueue('g', message('running'));
    await tick();
    void queue.enqueue('g', message('w1'));
    void queue.enqueue('g', message('w2'));
    const refused = await Promise.all([queue.enqueue('g', message('x1')), queue.enqueue('g', message('x2'))]);
    expect(refused).toEqual([expect.objectContaining({ ok: false, dropped: true }), expect.objectContaining({ ok: false, dropped: true })]);
    expect(overflows).toEqual([{ turn: 'x1', waiting: 2 }]);
    finish[0]();
    await tick();
    expect(queue.waiting('g')).toBe(0);
    finish[1]();
    await tick();
    // Caught up: a later overflow is told again.
    void queue.enqueue('g', message('r'));
    void queue.enqueue('g', message('y1'));
    void queue.enqueue('g', message('y2'));
    await queue.enqueue('g', message('y3'));
    expect(overflows.map((o) => o.turn)).toEqual(['x1', 'y3']);
  });

  it('one prompt for several messages names how many and keeps each whole', () => {
    expect(batchPrompt(['only'])).toBe('only');
    const p = batchPrompt(['first\nline', 'second']);
    expect(p).toMatch(/^2 messages arrived while you were busy, oldest first/);
    expect(p).toContain('--- message 1 of 2 ---\nfirst\nline');
    expect(p).toContain('--- message 2 of 2 ---\nsecond');
  });
});
