// The email plugin's console page (its panel): per group, the latest mails that reached
// its agent and the latest it sent (recent-mail.ts). Read only; reached only through the
// console (session and CSRF checked). The page renders every field as text.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bundledPanelFolder, panelPages, replyJson as reply } from '#sdk';
import type { RecentMail } from './recent-mail.js';

const pages = panelPages(bundledPanelFolder(import.meta.url, 'email'), ['email.js']);

export async function serveEmailPanel(groups: () => string[], recent: RecentMail, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://panel');
  if (req.method !== 'GET') return reply(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'the email page is read only' });
  if (pages(req, res)) return;
  if (url.pathname === '/api/groups') return reply(res, 200, { groups: groups() });
  if (url.pathname === '/api/recent') {
    const group = url.searchParams.get('group') ?? '';
    if (!groups().includes(group)) return reply(res, 404, { code: 'NOT_FOUND', message: 'no mailbox is configured for this group' });
    return reply(res, 200, { group, ...recent.list(group) });
  }
  reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
}
