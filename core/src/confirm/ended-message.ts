// What an answer to a confirmation that is no longer pending is told (console, admin API):
// how it ended, as this run of the core knows it, or that it went with a restart. The
// Telegram plugin words its prompts the same way (plugins/telegram/prompt-outcome.ts).
import type { ConfirmationStatus } from './confirmations.js';

export const ENDED_WITH_RESTART = 'This request ended when Carapace restarted; nothing ran.';

export function endedMessage(status: ConfirmationStatus): string {
  if (status.state === 'unknown') return ENDED_WITH_RESTART;
  if (status.state === 'pending') return 'This request is still waiting, but not for this answer.';
  if (status.decision === 'withdrawn') return `This request was withdrawn (${status.by}): nothing ran.`;
  if (status.decision === 'timeout') return 'This request timed out: nothing ran.';
  return `Already answered: ${status.decision} by ${status.by}.`;
}
