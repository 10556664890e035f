// How much the appliance's folders hold, for the overview. A walk of a big workspace is
// bounded (entries) and cached: the page may poll, the disk should not notice.
import { lstat, readdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';

export interface DiskUse {
  name: string;
  path: string;
  bytes: number;
  /** The walk stopped at its entry limit: at least `bytes`. */
  partial: boolean;
  /** Free bytes on the file system holding it. */
  free: number | null;
  /** Bytes it may still take (new workspaces' quotas), if it says. */
  claims: number | null;
}

const MAX_ENTRIES = 50_000;
const CACHE_MS = 60_000;

async function walk(dir: string, budget: { left: number }): Promise<number> {
  let bytes = 0;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (budget.left-- <= 0) return bytes;
    const path = join(dir, name);
    const info = await lstat(path).catch(() => null);
    if (!info) continue;
    // Allocated blocks, not the length: a sparse quota image counts what it really takes.
    bytes += info.blocks * 512;
    if (info.isDirectory()) bytes += await walk(path, budget);
  }
  return bytes;
}

export class DiskUsage {
  private cached: { at: number; value: Promise<DiskUse[]> } | null = null;

  constructor(private readonly folders: { name: string; path: string; claims?: () => number }[]) {}

  read(): Promise<DiskUse[]> {
    if (this.cached && Date.now() - this.cached.at < CACHE_MS) return this.cached.value;
    const value = Promise.all(
      this.folders.map(async ({ name, path, claims }) => {
        const budget = { left: MAX_ENTRIES };
        const bytes = await walk(path, budget);
        const fs = await statfs(path).catch(() => null);
        return { name, path, bytes, partial: budget.left <= 0, free: fs ? fs.bavail * fs.bsize : null, claims: claims ? claims() : null };
      }),
    );
    this.cached = { at: Date.now(), value };
    return value;
  }
}
