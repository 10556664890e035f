// The tasks plugin's console page (its panel): per group, what is scheduled, when it runs
// next, and which tasks a session scheduled after reading external content (their prompts
// may carry a stranger's words, and their runs wait for the person before any effect).
// Read-only: tasks are cancelled through the agent or the configuration.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bundledPanelFolder, panelPages, replyJson as reply } from '#sdk';
import { listTasks, taskGroups } from './listing.js';
import type { TaskRecord } from './store.js';

const pages = panelPages(bundledPanelFolder(import.meta.url, 'tasks'), ['tasks.js']);
const GROUP = /^[a-zA-Z0-9_-]{1,64}$/;

export function serveTasksPanel(records: Iterable<TaskRecord>, timezone: string, req: IncomingMessage, res: ServerResponse): void {
  if (pages(req, res)) return;
  const url = new URL(req.url ?? '/', 'http://panel');
  if (req.method !== 'GET') return reply(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'the Tasks page only reads' });
  if (url.pathname === '/api/groups') return reply(res, 200, { groups: taskGroups(records) });
  if (url.pathname === '/api/tasks') {
    const group = url.searchParams.get('group') ?? '';
    if (!GROUP.test(group)) return reply(res, 400, { code: 'INVALID_INPUT', message: 'group is a group name' });
    return reply(res, 200, { group, timezone, tasks: listTasks(records, group) });
  }
  reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
}
