// A process's memory as the host's /proc shows it (the soaks run as root, so the
// containers' processes are readable too).
import { readFileSync } from 'node:fs';

/** Resident set size in MB; NaN when the process is gone. */
export function rssMb(pid: number | null): number {
  if (!pid) return NaN;
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** The process and all its descendants, each with its command line. */
export function processTree(pid: number): { pid: number; cmdline: string }[] {
  const read = (path: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  const out: { pid: number; cmdline: string }[] = [];
  const walk = (p: number): void => {
    out.push({ pid: p, cmdline: read(`/proc/${p}/cmdline`).split('\0').join(' ').trim() });
    for (const child of read(`/proc/${p}/task/${p}/children`).split(' ').filter(Boolean)) walk(Number(child));
  };
  walk(pid);
  return out;
}
