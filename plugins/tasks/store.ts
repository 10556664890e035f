// The scheduler's state: the tasks the agent created and the run history of every task
// (last run, next run, failures, paused), in one small JSON file in the plugin's data
// directory. Written atomically (temp file + rename), one write at a time.
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export const STATE_FILE = 'tasks.json';
const VERSION = 1;

export type ScheduleType = 'cron' | 'once';

export interface TaskRecord {
  id: string;
  group: string;
  prompt: string;
  schedule: { type: ScheduleType; value: string };
  /** "agent": made with a tool, kept here; "config": from carapace.json, only its run state is kept. */
  source: 'agent' | 'config';
  created_at: string;
  /** Since when runs are tracked: a scheduled time after this (or last_run) that passed was missed. */
  since: string;
  last_run: string | null;
  next_run: string | null;
  consecutive_failures: number;
  paused: boolean;
  last_error: string | null;
  /**
   * Created by a session that had read external content (the core's label on the request):
   * its prompt may carry a stranger's words, so its runs count as having read it too.
   */
  external?: true;
}

/** One-shot tasks the agent created per group on one UTC day: the daily cap survives restarts. */
export type OneShotCounts = Record<string, { day: string; count: number }>;

export interface TaskState {
  tasks: TaskRecord[];
  oneShots: OneShotCounts;
}

export class StateFileError extends Error {}

function parseCounts(raw: unknown): OneShotCounts {
  const out: OneShotCounts = {};
  if (!raw || typeof raw !== 'object') return out;
  for (const [group, v] of Object.entries(raw as Record<string, { day?: unknown; count?: unknown }>)) {
    if (GROUP.test(group) && typeof v?.day === 'string' && typeof v.count === 'number' && Number.isSafeInteger(v.count) && v.count >= 0) out[group] = { day: v.day, count: v.count };
  }
  return out;
}

const ID = /^[A-Za-z0-9_.-]{1,64}$/;
const GROUP = /^[a-zA-Z0-9_-]{1,64}$/;
const isTime = (v: unknown): v is string => typeof v === 'string' && Number.isFinite(Date.parse(v));

function parseRecord(raw: unknown): TaskRecord | null {
  const r = raw as Partial<TaskRecord> | null;
  if (!r || typeof r !== 'object') return null;
  if (typeof r.id !== 'string' || !ID.test(r.id) || typeof r.group !== 'string' || !GROUP.test(r.group)) return null;
  if (typeof r.prompt !== 'string' || !r.schedule || (r.schedule.type !== 'cron' && r.schedule.type !== 'once') || typeof r.schedule.value !== 'string') return null;
  const created = isTime(r.created_at) ? r.created_at : new Date().toISOString();
  return {
    id: r.id,
    group: r.group,
    prompt: r.prompt,
    schedule: { type: r.schedule.type, value: r.schedule.value },
    source: r.source === 'config' ? 'config' : 'agent',
    created_at: created,
    since: isTime(r.since) ? r.since : created,
    last_run: isTime(r.last_run) ? r.last_run : null,
    next_run: isTime(r.next_run) ? r.next_run : null,
    consecutive_failures: typeof r.consecutive_failures === 'number' && Number.isSafeInteger(r.consecutive_failures) && r.consecutive_failures >= 0 ? r.consecutive_failures : 0,
    paused: r.paused === true,
    last_error: typeof r.last_error === 'string' ? r.last_error : null,
    ...(r.external === true ? { external: true as const } : {}),
  };
}

export class TaskStore {
  readonly file: string;
  private writing: Promise<void> = Promise.resolve();

  constructor(dir: string) {
    this.file = join(dir, STATE_FILE);
  }

  /** Missing file: no tasks yet. A file that is not our JSON is an error (never overwritten). */
  async load(): Promise<TaskState> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { tasks: [], oneShots: {} };
      throw new StateFileError(`cannot read ${STATE_FILE}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
    let data: { version?: unknown; tasks?: unknown; one_shots?: unknown };
    try {
      data = JSON.parse(text) as typeof data;
    } catch {
      throw new StateFileError(`${STATE_FILE} is not valid JSON; fix it or move it aside`);
    }
    if (!data || typeof data !== 'object' || !Array.isArray(data.tasks)) throw new StateFileError(`${STATE_FILE} has no "tasks" array; fix it or move it aside`);
    // Written by a newer Carapace: refused whole, never half-read (nor overwritten by a save).
    if (typeof data.version === 'number' && data.version > VERSION) throw new StateFileError(`${STATE_FILE} has format version ${data.version}, newer than the ${VERSION} this Carapace knows: run the newer version, or restore a backup`);
    const out: TaskRecord[] = [];
    const seen = new Set<string>();
    for (const raw of data.tasks) {
      const record = parseRecord(raw);
      if (record && !seen.has(record.id)) {
        seen.add(record.id);
        out.push(record);
      }
    }
    return { tasks: out, oneShots: parseCounts(data.one_shots) };
  }

  /** Serialized: each call writes the snapshot it was given, in call order. */
  save(records: TaskRecord[], oneShots: OneShotCounts = {}): Promise<void> {
    const text = JSON.stringify({ version: VERSION, tasks: records, one_shots: oneShots }, null, 1);
    const next = this.writing.catch(() => undefined).then(async () => {
      const temp = `${this.file}.${process.pid}.tmp`;
      await writeFile(temp, text, { mode: 0o600 });
      await rename(temp, this.file);
    });
    this.writing = next;
    return next;
  }

  async idle(): Promise<void> {
    await this.writing.catch(() => undefined);
  }
}
