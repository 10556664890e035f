// What a person is told about a turn besides its answer: a turn on their message that ended
// with no reply reaching them says so, and what failed when a reply was tried (the tool,
// its error code and message, scrubbed by the core: a send whose SMTP connection broke is
// not "refused, e.g. by a rate limit"); messages that had to wait past the queue's bound.
// And the bookkeeping it rests on: which replies and failed replies belong to a running turn.
import type { Core, Reply, ReplyFailure } from '../core.js';
import type { EventEnvelope } from '../protocol/envelope.js';
import { answersTurn } from './replies.js';
import type { QueuedTurn } from './turn-queue.js';
import { noAnswerNotice, previewOf, type UnfinishedTurns } from './unfinished-turns.js';

/** The turn running now: its events (several messages may share a turn), whether a reply reached the person, and the replies that failed. */
export interface RunningTurn {
  causes: EventEnvelope[];
  replied: boolean;
  failures: ReplyFailure[];
}

/** Failed replies kept per turn (the last ones: the notice names the latest). */
const MAX_FAILURES = 8;

/** A reply of the turn's session: true when it answers the turn (and its events are marked answered). */
export function noteReply(turn: RunningTurn, reply: Reply, unfinished: UnfinishedTurns | null): boolean {
  if (turn.replied || !answersTurn(reply, turn.causes)) return false;
  turn.replied = true;
  for (const cause of turn.causes) unfinished?.replied(cause.id);
  return true;
}

export function noteFailure(turn: RunningTurn, failure: ReplyFailure): void {
  turn.failures.push(failure);
  if (turn.failures.length > MAX_FAILURES) turn.failures.shift();
}

/** The person's message got no answer at all (a refused send, a model that gave up): they hear the turn ended, and what failed. */
export function tellNoAnswer(core: Core, group: string, session: string, cause: EventEnvelope, failures: ReplyFailure[]): void {
  const last = failures.at(-1);
  core.audit.record({ group, session, source: 'core', topic: cause.topic, correlation: null, stage: 'agent', outcome: 'error', reason: `agent turn ended without a reply reaching the person; user told${last ? ` (the last reply tried: ${last.tool}, ${last.code})` : ''}` });
  core.publish('user.notify', group, { text: noAnswerNotice(previewOf(cause), last ? { ...last, more: failures.length - 1 } : null) });
}

/** More turns wait than the queue holds: the newer ones are not handled, and the person is told once. */
export function tellOverflow(core: Core, group: string, turn: QueuedTurn, waiting: number): void {
  core.audit.record({ group, session: null, source: 'core', topic: turn.cause?.topic ?? null, correlation: null, stage: 'agent', outcome: 'dropped', reason: `${waiting} turns already waiting: messages are not handled until the agent catches up; user told` });
  const what = turn.cause ? ` ("${previewOf(turn.cause)}" and any more)` : '';
  core.publish('user.notify', group, { text: `Carapace: ${waiting} messages are already waiting for the agent, so newer ones${what} are not handled until it catches up. Send them again later.` });
}
