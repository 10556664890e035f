// CalDAV failures as the agent and the owner see them: a closed InitError category at start,
// a ToolError with a code and no URL, path or credential on a call.
import { ToolError } from '#sdk';
import { DavAuthRejected, DavConflict, DavHttpError, DavUnreachable } from '#sdk/calendar';

/** What the agent sees for a failure while handling a call. */
export function toolError(err: unknown): unknown {
  if (err instanceof ToolError) return err;
  if (err instanceof DavUnreachable) return new ToolError({ code: 'CALENDAR_UNREACHABLE', message: 'The calendar server is unreachable right now; try again in a few minutes.', retriable: true });
  if (err instanceof DavAuthRejected) {
    return new ToolError({ code: 'CALENDAR_AUTH', message: 'The calendar server no longer accepts the configured username or password; the owner has to update the calendar settings.', retriable: false });
  }
  if (err instanceof DavConflict) return new ToolError({ code: 'EVENT_CHANGED', message: 'The event was changed elsewhere at the same moment; try again.', retriable: true });
  if (err instanceof DavHttpError) {
    if (err.status === 403) return new ToolError({ code: 'CALENDAR_READ_ONLY', message: 'The calendar server does not allow this change (the calendar may be read-only or shared).', retriable: false });
    if (err.status >= 500) return new ToolError({ code: 'CALENDAR_SERVER_ERROR', message: `The calendar server failed (HTTP ${err.status}); try again later.`, retriable: true });
    return new ToolError({ code: 'CALENDAR_REFUSED', message: `The calendar server refused the request (HTTP ${err.status}).`, retriable: false });
  }
  return err;
}
