// What a closed confirmation prompt says under its text, and what a press on it answers:
// from the core's own word on the request (confirmationStatus), never a guess.
import type { ConfirmationStatus } from '#sdk';

/** The request is gone with a core that restarted: no caller waits, nothing of it can run. */
export const RESTARTED = 'This request ended when Carapace restarted; nothing ran.';

/** The note for a prompt whose request is no longer pending; null while it is. */
export function outcomeNote(status: ConfirmationStatus): string | null {
  if (status.state === 'pending') return null;
  if (status.state === 'unknown') return RESTARTED;
  if (status.decision === 'withdrawn') return `Withdrawn (${status.by}): nothing ran`;
  if (status.decision === 'timeout') return 'Timed out: nothing ran';
  return `${status.decision === 'approved' ? 'Approved' : 'Denied'} by ${status.by}`;
}
