// The reports this plugin filed in the last day, by a key of their content, kept in its
// data directory so that a restart does not forget them: the same report is refused rather
// than filed twice (a retry, a repeated standing approval, a looping agent).
import { readVersionedJson, versionedJsonText, writeAtomically } from '#sdk';

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
    // Version 1: `{version, reports}`; version 0 was the list alone. Unreadable: moved aside,
    // started empty (at worst one duplicate can be filed).
    const saved = readVersionedJson(file, {
      migrations: [(json) => ({ reports: json })],
      read: (json) => {
        const reports = (json as { reports?: unknown } | null)?.reports;
        if (!Array.isArray(reports)) throw new Error('no reports list');
        return reports.filter((e): e is Filed => typeof e?.key === 'string' && typeof e?.url === 'string' && typeof e?.at === 'string');
      },
    });
    if (saved.kind === 'loaded') this.entries = saved.value;
  }

  find(key: string): Filed | null {
    const since = Date.now() - DAY_MS;
    return this.entries.find((e) => e.key === key && Date.parse(e.at) > since) ?? null;
  }

  add(key: string, url: string): void {
    const since = Date.now() - DAY_MS;
    this.entries = [...this.entries.filter((e) => Date.parse(e.at) > since), { key, url, at: new Date().toISOString() }].slice(-MAX_KEPT);
    try {
      writeAtomically(this.file, versionedJsonText(1, { reports: this.entries }));
    } catch {
      // kept in memory for this run
    }
  }
}
