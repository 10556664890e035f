// The calendar plugin's console page (its panel): per group, the calendars it may use and
// its coming events. Read only; reached only through the console (session and CSRF checked).
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What the page needs from the plugin. */
export interface PanelSource {
  panelGroups(): string[];
  panelOverview(group: string, days: number): Promise<unknown>;
}

const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../plugins/calendar/panel');
const PAGES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/calendar.js': { file: 'calendar.js', type: 'text/javascript; charset=utf-8' },
};

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

export async function serveCalendarPanel(source: PanelSource, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://panel');
  const page = PAGES[url.pathname];
  if (req.method !== 'GET') return reply(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'the calendar page is read only' });
  if (page) {
    res.writeHead(200, { 'content-type': page.type, 'cache-control': 'no-store' });
    res.end(readFileSync(join(PAGE_DIR, page.file)));
    return;
  }
  if (url.pathname === '/api/groups') return reply(res, 200, { groups: source.panelGroups() });
  if (url.pathname === '/api/overview') {
    const group = url.searchParams.get('group') ?? '';
    if (!source.panelGroups().includes(group)) return reply(res, 404, { code: 'NOT_FOUND', message: 'no calendars are configured for this group' });
    const days = Math.min(31, Math.max(1, Number.parseInt(url.searchParams.get('days') ?? '7', 10) || 7));
    try {
      return reply(res, 200, await source.panelOverview(group, days));
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      return reply(res, 502, { code: typeof e.code === 'string' ? e.code : 'CALENDAR_ERROR', message: 'the calendar server could not be read; see the plugin health on the Overview' });
    }
  }
  reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
}
