// The memory plugin's console page (its panel): per group, search what the agent keeps,
// read an entry with its provenance (which session, when, which call stored it), and
// delete one. Reached only through the console (session and CSRF checked, and each
// deletion audited by the core); the core never opens these files itself.
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MemoryDatabases } from './databases.js';

const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../plugins/memory/panel');
const PAGES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/memory.js': { file: 'memory.js', type: 'text/javascript; charset=utf-8' },
};
const GROUP = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MAX_BODY_BYTES = 4096;

export async function serveMemoryPanel(databases: MemoryDatabases, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://panel');
  const page = PAGES[url.pathname];
  if (req.method === 'GET' && page) {
    res.writeHead(200, { 'content-type': page.type, 'cache-control': 'no-store' });
    res.end(readFileSync(join(PAGE_DIR, page.file)));
    return;
  }
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
    const id = (await readJson(req))?.id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 100) return reply(res, 400, { code: 'INVALID_INPUT', message: 'needs {"id": string}' });
    return db?.delete(id) ? reply(res, 200, { id, deleted: true }) : reply(res, 404, { code: 'NOT_FOUND', message: 'no such memory entry in this group' });
  }
  reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk);
  }
  try {
    const value = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
