// An audit outage, and its end, told once to each group with a live session: while it
// lasts no tool call is done (AUDIT_UNAVAILABLE), and the person should know why.
import type { AuditLog } from './audit-log.js';

export function tellAuditOutages(audit: AuditLog, liveGroups: () => Iterable<string>, notify: (group: string, text: string) => void): void {
  const tell = (text: string): void => {
    for (const group of new Set(liveGroups())) notify(group, text);
  };
  audit.on('down', (reason) => tell(`The audit log cannot be written (${reason}): tool calls are refused until it can. Free space on the log volume; it recovers by itself.`));
  audit.on('up', (lost) => tell(`The audit log is writable again (${lost} entries could not be written during the outage).`));
}
