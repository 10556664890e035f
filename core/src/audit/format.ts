// One audit entry as one readable line (for `make logs`).

const OUTCOME_COLOR: Record<string, number> = { ok: 32, passed: 32, routed: 36, pending: 33, sanitized: 33, rejected: 31, dropped: 31, error: 31 };

export function formatEntry(line: string, colors = false): string {
  const color = (code: number, s: string): string => (colors ? `\u001b[${code}m${s}\u001b[0m` : s);
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof e.timestamp === 'string' ? e.timestamp.slice(11, 23) : '--:--:--.---';
  const outcome = String(e.outcome ?? '?');
  const parts = [
    time,
    e.severity === 'CRITICAL' ? color(41, 'CRITICAL') : '',
    String(e.group ?? '-').padEnd(12),
    String(e.topic ?? e.source ?? '-').padEnd(28),
    String(e.stage ?? '-').padEnd(10),
    color(OUTCOME_COLOR[outcome] ?? 0, outcome.padEnd(9)),
    e.code ? String(e.code) : '',
    e.reason ? String(e.reason) : '',
    Array.isArray(e.samples) && e.samples.length > 0 ? color(90, `(e.g. ${e.samples.map(String).join(', ')})`) : '',
    e.correlation ? color(90, `[${String(e.correlation).slice(0, 8)}]`) : '',
    e.duration_ms !== undefined ? color(90, `${String(e.duration_ms)}ms`) : '',
  ];
  return parts.filter((p) => p !== '').join(' ');
}

