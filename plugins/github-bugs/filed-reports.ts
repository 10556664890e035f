// The reports this plugin filed in the last day, by a key of their content, kept in its
// data directory so that a restart does not forget them: the same report is refused rather
// than filed twice (a retry, a repeated standing approval, a looping agent).
import { readFileSync } from 'node:fs';
import { writeAtomically } from '#sdk';

const DAY_MS = 86_400_000;
const MAX_KEPT = 500;

interface Filed {
  key: string;
  url: string;
  at: string;
}

export class FiledReports {
  private entries: Filed[] = [];

  constructor(private readonly file: string) {
    try {
      const data = JSON.parse(readFileSync(file, 'utf8')) as unknown;
      if (Array.isArray(data)) this.entries = data.filter((e): e is Filed => typeof e?.key === 'string' && typeof e?.url === 'string' && typeof e?.at === 'string');
    } catch {
      // none yet, or unreadable: start empty (at worst one duplicate can be filed)
    }
  }

  find(key: string): Filed | null {
    const since = Date.now() - DAY_MS;
    return this.entries.find((e) => e.key === key && Date.parse(e.at) > since) ?? null;
  }

  add(key: string, url: string): void {
    const since = Date.now() - DAY_MS;
    this.entries = [...this.entries.filter((e) => Date.parse(e.at) > since), { key, url, at: new Date().toISOString() }].slice(-MAX_KEPT);
    try {
      writeAtomically(this.file, JSON.stringify(this.entries));
    } catch {
      // kept in memory for this run
    }
  }
}
