// The memory plugin's console page (its panel): per group, search what the agent keeps,
// read an entry with its provenance (which session, when, which call stored it), and
// delete one. Reached only through the console (session and CSRF checked, and each
// deletion audited by the core); the core never opens these files itself.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bundledPanelFolder, panelPages, readJsonBody, replyJson as reply } from '#sdk';
import type { MemoryDatabases } from './databases.js';

const pages = panelPages(bundledPanelFolder(import.meta.url, 'memory'), ['memory.js']);
const GROUP = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MAX_BODY_BYTES = 4096;

export async function serveMemoryPanel(databases: MemoryDatabases, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://panel');
  if (pages(req, res)) return;
  if (req.method === 'GET' && url.pathname === '/api/groups') return reply(res, 200, { groups: databases.existingGroups() });
  const group = url.searchParams.get('group') ?? '';
  if (!GROUP.test(group)) return reply(res, 400, { code: 'INVALID_INPUT', message: 'group is a group name' });
  const db = databases.get(group, false);
  if (req.method === 'GET' && url.pathname === '/api/search') {
    const query = (url.searchParams.get('q') ?? '').slice(0, 500);
    const results = db ? db.search({ query: query || undefined, includeSuperseded: url.searchParams.get('superseded') === '1', limit: 100 }) : [];
    return reply(res, 200, { results });
  }
  if (req.method === 'GET' && url.pathname === '/api/entry') {
    const entry = db?.get((url.searchParams.get('id') ?? '').slice(0, 100)) ?? null;
    return entry ? reply(res, 200, { entry }) : reply(res, 404, { code: 'NOT_FOUND', message: 'no such memory entry in this group' });
  }
  if (req.method === 'POST' && url.pathname === '/api/delete') {
    const id = (await readJsonBody(req, MAX_BODY_BYTES))?.id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 100) return reply(res, 400, { code: 'INVALID_INPUT', message: 'needs {"id": string}' });
    return db?.delete(id) ? reply(res, 200, { id, deleted: true }) : reply(res, 404, { code: 'NOT_FOUND', message: 'no such memory entry in this group' });
  }
  reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
}
