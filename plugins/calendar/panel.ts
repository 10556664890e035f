// The calendar plugin's console page (its panel): per group, the calendars it may use and
// its coming events. Read only; reached only through the console (session and CSRF checked).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bundledPanelFolder, panelPages, replyJson as reply } from '#sdk';

/** What the page needs from the plugin. */
export interface PanelSource {
  panelGroups(): string[];
  panelOverview(group: string, days: number): Promise<unknown>;
}

const pages = panelPages(bundledPanelFolder(import.meta.url, 'calendar'), ['calendar.js']);

export async function serveCalendarPanel(source: PanelSource, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://panel');
  if (req.method !== 'GET') return reply(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'the calendar page is read only' });
  if (pages(req, res)) return;
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
