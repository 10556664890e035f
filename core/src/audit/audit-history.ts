// What Activity shows after a restart or an upgrade: the newest entries of the audit files
// already on disk (the current file, then the rotated ones, newest first), read once when
// the log opens. Bounded by entries and bytes: a huge or damaged file costs a slower start,
// never an unbounded one, and a line that is not an entry (cut short, hand-edited, from a
// version that wrote other fields) is skipped, never shown half-read.
import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { AuditEntry } from './audit-log.js';

/** Bytes read from the files at most (about 100,000 entries). */
export const HISTORY_MAX_BYTES = 32 * 1024 * 1024;

/** The audit files beside `file` (it, then its rotations `file.N`), newest first. */
export function auditFiles(file: string): string[] {
  const dir = dirname(file);
  const name = basename(file);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const found = names
    .filter((n) => n === name || (n.startsWith(`${name}.`) && /^\d+$/.test(n.slice(name.length + 1))))
    .map((n) => {
      try {
        return { path: join(dir, n), mtime: statSync(join(dir, n)).mtimeMs, current: n === name };
      } catch {
        return null;
      }
    })
    .filter((f): f is { path: string; mtime: number; current: boolean } => f !== null);
  // The current file first, then rotations by age (whatever their numbering).
  return found.sort((a, b) => Number(b.current) - Number(a.current) || b.mtime - a.mtime).map((f) => f.path);
}

/** One line as an entry, or null when it is not one. */
export function parseEntry(line: string): AuditEntry | null {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return null;
  }
  if (!json || typeof json !== 'object') return null;
  const e = json as Record<string, unknown>;
  if (typeof e.timestamp !== 'string' || typeof e.stage !== 'string' || typeof e.outcome !== 'string' || typeof e.source !== 'string') return null;
  const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const entry: AuditEntry = {
    timestamp: e.timestamp,
    group: text(e.group),
    session: text(e.session),
    source: e.source,
    topic: text(e.topic),
    correlation: text(e.correlation),
    stage: e.stage as AuditEntry['stage'],
    outcome: e.outcome as AuditEntry['outcome'],
  };
  if (typeof e.reason === 'string') entry.reason = e.reason;
  if (typeof e.code === 'string') entry.code = e.code;
  if (e.severity === 'CRITICAL') entry.severity = 'CRITICAL';
  if (typeof e.duration_ms === 'number') entry.duration_ms = e.duration_ms;
  if (Array.isArray(e.fields)) entry.fields = e.fields.filter((f): f is string => typeof f === 'string');
  if (typeof e.detail === 'string') entry.detail = e.detail;
  if (typeof e.repeats === 'number') entry.repeats = e.repeats;
  if (Array.isArray(e.samples)) entry.samples = e.samples.filter((f): f is string => typeof f === 'string');
  return entry;
}

/** The last `bytes` of a file, from its first whole line. */
function tail(path: string, bytes: number): string {
  const fd = openSync(path, 'r');
  try {
    const size = statSync(path).size;
    const start = Math.max(0, size - bytes);
    const buffer = Buffer.alloc(size - start);
    let read = 0;
    while (read < buffer.length) {
      const n = readSync(fd, buffer, read, buffer.length - read, start + read);
      if (n === 0) break;
      read += n;
    }
    const text = buffer.subarray(0, read).toString('utf8');
    return start === 0 ? text : text.slice(text.indexOf('\n') + 1);
  } finally {
    closeSync(fd);
  }
}

/** The newest `limit` entries of the audit files, oldest first. */
export function readAuditHistory(file: string, limit: number, maxBytes = HISTORY_MAX_BYTES): AuditEntry[] {
  const chunks: AuditEntry[][] = [];
  let count = 0;
  let budget = maxBytes;
  for (const path of auditFiles(file)) {
    if (count >= limit || budget <= 0) break;
    let text: string;
    try {
      text = tail(path, budget);
    } catch {
      continue; // gone (pruned) or unreadable: the others still count
    }
    budget -= Buffer.byteLength(text);
    const entries = text.split('\n').map(parseEntry).filter((e): e is AuditEntry => e !== null);
    const kept = entries.slice(Math.max(0, entries.length - (limit - count)));
    count += kept.length;
    chunks.unshift(kept);
  }
  return chunks.flat();
}
