// A process's memory as the host's /proc shows it (the soaks run as root, so the
// containers' processes are readable too).
import { readdirSync, readFileSync } from 'node:fs';

/** Resident set size in MB; NaN when the process is gone. */
export function rssMb(pid: number | null): number {
  if (!pid) return NaN;
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** A process's children: /proc/<pid>/task/<tid>/children, or every /proc/<n>/stat naming it as parent. */
export function childrenOf(pid: number): number[] {
  try {
    const kids = readdirSync(`/proc/${pid}/task`).flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    if (kids.length > 0) return kids;
  } catch {
    // no CONFIG_PROC_CHILDREN, or gone: scan
  }
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((n) => {
      try {
        const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    });
}

/** The process and all its descendants, each with its command line. */
export function processTree(pid: number): { pid: number; cmdline: string }[] {
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    // gone
  }
  return [{ pid, cmdline }, ...childrenOf(pid).flatMap(processTree)];
}
