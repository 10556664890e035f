// Each group's turns, one at a time and in order. Messages that arrive while a turn runs are
// batched into the agent's next turn (up to `maxBatch`), as a person typing several lines
// expects; a scheduled task always has a turn of its own. While the group's model budget is
// spent, turns wait until it renews instead of failing one by one. At most `maxWaiting` wait
// per group: more are refused at once, and the person hears about it once per overflow.
import type { EventEnvelope } from '../protocol/envelope.js';

export interface QueuedTurn {
  prompt: string;
  cause?: EventEnvelope;
  /** The last turn of this session (its id) before the idle agent is removed. */
  last?: string;
}

export interface TurnOutcome {
  ok: boolean;
  output: string;
  /** Refused because too many were waiting: no turn ran. */
  dropped?: true;
}

export interface TurnQueueOptions {
  /** Messages taken into one turn at most. */
  maxBatch: number;
  /** Turns waiting per group at most. */
  maxWaiting: number;
  /** Runs one turn for `turns` (more than one only for messages). */
  run: (group: string, turns: QueuedTurn[]) => Promise<TurnOutcome>;
  /** The first turn refused in an overflow (the queue was full), to tell the person once. */
  overflowed: (group: string, turn: QueuedTurn, waiting: number) => void;
  now?: () => number;
}

interface Waiting {
  turn: QueuedTurn;
  resolve: (outcome: TurnOutcome) => void;
  reject: (err: unknown) => void;
}

interface GroupQueue {
  waiting: Waiting[];
  running: boolean;
  heldUntil: number;
  timer: NodeJS.Timeout | null;
  overflowing: boolean;
}

const isMessage = (turn: QueuedTurn): boolean => turn.cause?.topic === 'message.inbound';

export class TurnQueue {
  private readonly groups = new Map<string, GroupQueue>();
  private readonly now: () => number;

  constructor(private readonly options: TurnQueueOptions) {
    this.now = options.now ?? Date.now;
  }

  enqueue(group: string, turn: QueuedTurn): Promise<TurnOutcome> {
    const queue = this.queueOf(group);
    if (queue.waiting.length >= this.options.maxWaiting) {
      if (!queue.overflowing) this.options.overflowed(group, turn, queue.waiting.length);
      queue.overflowing = true;
      return Promise.resolve({ ok: false, output: `not handled: ${queue.waiting.length} turns were already waiting`, dropped: true });
    }
    return new Promise<TurnOutcome>((resolve, reject) => {
      queue.waiting.push({ turn, resolve, reject });
      this.pump(group, queue);
    });
  }

  /** The group's model budget is spent until `until` (ms since the epoch): its turns wait. */
  holdUntil(group: string, until: number): void {
    const queue = this.queueOf(group);
    queue.heldUntil = Math.max(queue.heldUntil, until);
  }

  /** Turns waiting (not running) in `group`. */
  waiting(group: string): number {
    return this.groups.get(group)?.waiting.length ?? 0;
  }

  /** Ends every wait (the core is stopping): those turns get `outcome`. */
  clear(outcome: TurnOutcome): void {
    for (const queue of this.groups.values()) {
      if (queue.timer) clearTimeout(queue.timer);
      for (const w of queue.waiting.splice(0)) w.resolve(outcome);
    }
  }

  private queueOf(group: string): GroupQueue {
    let queue = this.groups.get(group);
    if (!queue) {
      queue = { waiting: [], running: false, heldUntil: 0, timer: null, overflowing: false };
      this.groups.set(group, queue);
    }
    return queue;
  }

  private pump(group: string, queue: GroupQueue): void {
    if (queue.running || queue.waiting.length === 0 || queue.timer) return;
    const wait = queue.heldUntil - this.now();
    if (wait > 0) {
      queue.timer = setTimeout(() => {
        queue.timer = null;
        this.pump(group, queue);
      }, wait);
      queue.timer.unref();
      return;
    }
    let take = 1;
    if (isMessage(queue.waiting[0].turn)) {
      while (take < queue.waiting.length && take < this.options.maxBatch && isMessage(queue.waiting[take].turn)) take++;
    }
    const batch = queue.waiting.splice(0, take);
    if (queue.waiting.length === 0) queue.overflowing = false;
    queue.running = true;
    this.options
      .run(group, batch.map((w) => w.turn))
      .then(
        (outcome) => batch.forEach((w) => w.resolve(outcome)),
        (err: unknown) => batch.forEach((w) => w.reject(err)),
      )
      .finally(() => {
        queue.running = false;
        if (queue.waiting.length === 0 && queue.heldUntil <= this.now()) this.groups.delete(group);
        else this.pump(group, queue);
      });
  }
}

/** One prompt for several messages: each as its own prompt said, oldest first. */
export function batchPrompt(prompts: string[]): string {
  if (prompts.length === 1) return prompts[0];
  return [
    `${prompts.length} messages arrived while you were busy, oldest first. Read them all, then answer each as it says (one reply may answer several from the same person).`,
    ...prompts.map((p, i) => `\n--- message ${i + 1} of ${prompts.length} ---\n${p}`),
  ].join('\n');
}
