// A group's tasks as list_tasks and the console's Tasks page show them: next run first,
// with where each came from (`source`, and `external` for one a session scheduled after
// reading external content: its prompt may carry a stranger's words).
import type { TaskRecord } from './store.js';

export interface ListedTask {
  task_id: string;
  type: TaskRecord['schedule']['type'];
  schedule: string;
  prompt: string;
  status: 'active' | 'paused';
  source: TaskRecord['source'];
  external?: true;
  next_run: string | null;
  last_run: string | null;
  consecutive_failures: number;
  last_error?: string;
}

export function listTasks(records: Iterable<TaskRecord>, group: string): ListedTask[] {
  return [...records]
    .filter((r) => r.group === group)
    .sort((a, b) => (a.next_run ?? '~').localeCompare(b.next_run ?? '~') || a.id.localeCompare(b.id))
    .map((r) => ({
      task_id: r.id,
      type: r.schedule.type,
      schedule: r.schedule.value,
      prompt: r.prompt,
      status: r.paused ? 'paused' : 'active',
      source: r.source,
      ...(r.external ? { external: true as const } : {}),
      next_run: r.paused ? null : r.next_run,
      last_run: r.last_run,
      consecutive_failures: r.consecutive_failures,
      ...(r.last_error ? { last_error: r.last_error } : {}),
    }));
}

/** The groups that have a task, sorted. */
export function taskGroups(records: Iterable<TaskRecord>): string[] {
  return [...new Set([...records].map((r) => r.group))].sort();
}
