// The CalDAV plugins' connection check (calendar, reminders): the server reached, the login
// taken, and the calendars listed (PROPFIND of the principal, its calendar home, the home's
// collections), each failure with its step, the HTTP status and the server's own message.
// Plain PROPFINDs through the global fetch (the plugin's relay), so that every answer is
// seen as the server gave it. Nothing is written.
import { errorWords, isTlsFailure, reach, scrubSecrets, tlsWords, type ConnectionCheckContext, type ConnectionCheckResult, type ConnectionStep } from './connection-check.js';

export interface CalDavCheckSettings {
  server_url?: unknown;
  username?: unknown;
  password?: unknown;
}

const PROPFIND_MS = 8000;
const MAX_MESSAGE = 400;

const decode = (text: string): string => text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

/** What a server said in an error's body: a WebDAV error's message, else its text without markup. */
export function serverMessage(body: string): string {
  const message = /<(?:[\w-]+:)?message>([\s\S]*?)<\/(?:[\w-]+:)?message>/i.exec(body)?.[1];
  const text = decode((message ?? body.replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ').replace(/<[^>]*>/g, ' ')).replace(/\s+/g, ' ').trim());
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

interface DavResponse {
  href: string;
  body: string;
}

/** The <response> elements of a multistatus body, each with its href. */
function responses(xml: string): DavResponse[] {
  return [...xml.matchAll(/<(?:[\w-]+:)?response\b[^>]*>([\s\S]*?)<\/(?:[\w-]+:)?response>/gi)].map((m) => ({ href: decode(/<(?:[\w-]+:)?href>\s*([^<]*?)\s*<\/(?:[\w-]+:)?href>/i.exec(m[1])?.[1] ?? ''), body: m[1] }));
}

/** The href inside property `name` of a response body (current-user-principal, calendar-home-set). */
function hrefIn(body: string, name: string): string | null {
  const prop = new RegExp(`<(?:[\\w-]+:)?${name}\\b[^>]*>([\\s\\S]*?)</(?:[\\w-]+:)?${name}>`, 'i').exec(body)?.[1];
  const href = prop ? /<(?:[\w-]+:)?href>\s*([^<]*?)\s*<\/(?:[\w-]+:)?href>/i.exec(prop)?.[1] : undefined;
  return href ? decode(href) : null;
}

const isCalendar = (body: string): boolean => /<(?:[\w-]+:)?resourcetype\b[^>]*>[\s\S]*?<(?:[\w-]+:)?calendar\s*\/?>[\s\S]*?<\/(?:[\w-]+:)?resourcetype>/i.test(body);
const components = (body: string): string[] => [...body.matchAll(/<(?:[\w-]+:)?comp\s+name="([A-Z]+)"/gi)].map((m) => m[1].toUpperCase());
const displayName = (body: string, href: string): string => decode(/<(?:[\w-]+:)?displayname>([^<]*)<\/(?:[\w-]+:)?displayname>/i.exec(body)?.[1] ?? '').trim() || decodeURIComponent(href.replace(/\/$/, '').split('/').pop() ?? href);

type Step = { ok: true; status: number; xml: string; url: URL } | { ok: false; result: ConnectionCheckResult };

export async function checkCalDav(config: CalDavCheckSettings, context: ConnectionCheckContext, component: 'VEVENT' | 'VTODO'): Promise<ConnectionCheckResult[]> {
  let base: URL;
  try {
    base = new URL(String(config.server_url ?? ''));
  } catch {
    return [{ name: 'CalDAV', ok: false, step: 'dns', message: 'server_url is not a URL' }];
  }
  const user = typeof config.username === 'string' && config.username !== '' ? config.username : undefined;
  const password = typeof config.password === 'string' ? config.password : undefined;
  const name = `CalDAV ${base.origin}`;
  const fail = (step: ConnectionStep, message: string): ConnectionCheckResult => ({ name, ok: false, step, message: scrubSecrets(message, [password]) });
  const port = Number(base.port || (base.protocol === 'https:' ? 443 : 80));
  const reached = await reach(base.hostname, port, context);
  if (!reached.ok) return [fail(reached.step, reached.message)];
  const headers: Record<string, string> = { depth: '0', 'content-type': 'application/xml; charset=utf-8' };
  if (user !== undefined) headers.authorization = `Basic ${Buffer.from(`${user}:${password ?? ''}`).toString('base64')}`;

  const propfind = async (url: URL, depth: '0' | '1', props: string, what: string): Promise<Step> => {
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'PROPFIND',
        headers: { ...headers, depth },
        body: `<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop>${props}</D:prop></D:propfind>`,
        signal: AbortSignal.any([context.signal, AbortSignal.timeout(PROPFIND_MS)]),
      });
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause ?? err;
      if (isTlsFailure(cause)) return { ok: false, result: fail('tls', `TLS with ${base.host} failed: ${tlsWords(cause)}`) };
      return { ok: false, result: fail('connect', `${what} got no answer: ${errorWords(cause)}`) };
    }
    const text = await res.text().catch(() => '');
    const said = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}${serverMessage(text) ? `: ${serverMessage(text)}` : ''}`;
    if (res.status === 401 || res.status === 403) return { ok: false, result: fail('login', `the server refused the login${user ? ` of ${user}` : ' (no username is configured)'}: ${said}`) };
    if (res.status !== 207) return { ok: false, result: fail('listing', `${what} answered ${said}`) };
    return { ok: true, status: res.status, xml: text, url: new URL(res.url || url.href) };
  };

  // The configured URL: the principal it names (or it is a calendar, or a calendar home itself).
  const first = await propfind(base, '0', '<D:current-user-principal/><D:resourcetype/><D:displayname/><C:calendar-home-set/>', `PROPFIND ${base.pathname}`);
  if (!first.ok) return [first.result];
  const [top] = responses(first.xml);
  if (top && isCalendar(top.body)) return [{ name, ok: true, step: 'listing', message: `logged in${user ? ` as ${user}` : ''}; ${base.pathname} is the calendar "${displayName(top.body, top.href)}"` }];
  let home = top ? hrefIn(top.body, 'calendar-home-set') : null;
  const principal = top ? hrefIn(top.body, 'current-user-principal') : null;
  if (!home && principal) {
    const p = await propfind(new URL(principal, first.url), '0', '<C:calendar-home-set/>', `PROPFIND of the principal ${principal}`);
    if (!p.ok) return [p.result];
    home = hrefIn(responses(p.xml)[0]?.body ?? '', 'calendar-home-set');
  }
  const homeUrl = new URL(home ?? base.href, first.url);
  const listing = await propfind(homeUrl, '1', '<D:resourcetype/><D:displayname/><C:supported-calendar-component-set/>', `PROPFIND of the calendar home ${homeUrl.pathname}`);
  if (!listing.ok) return [listing.result];
  const calendars = responses(listing.xml).filter((r) => isCalendar(r.body) && (components(r.body).length === 0 || components(r.body).includes(component)));
  const names = calendars.map((c) => `"${displayName(c.body, c.href)}"`);
  const kind = component === 'VTODO' ? 'reminder list' : 'calendar';
  const listed = names.length === 0 ? `no ${kind}s yet` : `${names.length} ${kind}${names.length === 1 ? '' : 's'}: ${names.slice(0, 8).join(', ')}${names.length > 8 ? ', …' : ''}`;
  return [{ name, ok: true, step: 'listing', message: scrubSecrets(`logged in${user ? ` as ${user}` : ''}; the calendar home ${homeUrl.pathname} lists ${listed}`, [password]) }];
}
