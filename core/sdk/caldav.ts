// CalDAV for plugins (reminders, calendar). tsdav does discovery (well-known URL, principal,
// calendar home) and the WebDAV XML; this module adds what plugins need on top: one fetch
// that classifies failures (unreachable, credentials refused, HTTP status) and goes through
// the global fetch (so the egress proxy, undici's global dispatcher, applies), the calendar
// collections that hold a component type (VTODO lists, VEVENT calendars), and object reads
// and writes with ETags so a concurrent edit in another client is never overwritten silently.
import { AsyncLocalStorage } from 'node:async_hooks';
import { DAVClient, type DAVResponse } from 'tsdav';
import { AbortedBeforeActing, InitError } from './index.js';

/** The request a store call serves: its abort signal, and whether a write was sent for it. */
export interface RequestScope {
  signal?: AbortSignal;
  /** Set before the first request that may change the server (so an abort after it may have acted). */
  wrote: boolean;
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PROPFIND', 'REPORT']);
const scopes = new AsyncLocalStorage<RequestScope>();

/** Runs `fn` with every request it makes (through tsdav too) bound to `scope`'s signal. */
export function inRequest<T>(scope: RequestScope, fn: () => Promise<T>): Promise<T> {
  return scopes.run(scope, fn);
}

/**
 * One tool call's CalDAV work, bound to its signal: cut off at the deadline before anything
 * was written, nothing happened (AbortedBeforeActing: the agent may retry); any other
 * failure as `toError` makes it.
 */
export async function davRequest<T>(signal: AbortSignal | undefined, run: () => Promise<T>, toError: (err: unknown) => unknown): Promise<T> {
  const scope: RequestScope = { signal, wrote: false };
  try {
    return await inRequest(scope, run);
  } catch (err) {
    if (scope.signal?.aborted && !scope.wrote) throw new AbortedBeforeActing();
    throw toError(err);
  }
}

/** The server could not be reached, or did not answer in time. */
export class DavUnreachable extends Error {
  readonly code: string;
  constructor(code: string) {
    super(code === 'TIMEOUT' ? 'the CalDAV server did not answer in time' : `the CalDAV server is unreachable (${code})`);
    this.name = 'DavUnreachable';
    this.code = code === 'TIMEOUT' ? 'ETIMEDOUT' : code;
  }
}

/** The server answered 401: the username or password is wrong. */
export class DavAuthRejected extends Error {
  readonly status = 401;
  constructor() {
    super('the CalDAV server rejected the username or password (HTTP 401)');
    this.name = 'DavAuthRejected';
  }
}

/** Any other unexpected HTTP status. Only the operation and the status: never a URL. */
export class DavHttpError extends Error {
  constructor(
    readonly status: number,
    readonly operation: string,
  ) {
    super(`${operation}: the CalDAV server answered HTTP ${status}`);
    this.name = 'DavHttpError';
  }
}

/** A conditional write lost against another change (412): read again and retry. */
export class DavConflict extends Error {
  constructor() {
    super('the object changed on the server meanwhile');
    this.name = 'DavConflict';
  }
}

/** A calendar collection: a reminders list or an event calendar. */
export interface DavCollection {
  /** The display name (what a person calls it); the last path segment when unset. */
  name: string;
  url: string;
}

export interface StoredObject {
  url: string;
  etag: string | null;
  data: string;
}

/** The component types a collection may hold that plugins ask for. */
export type DavComponent = 'VTODO' | 'VEVENT';

/** A UTC time range for a calendar-query (RFC 4791 9.9); the server expands recurrences for it. */
export interface DavTimeRange {
  start: Date;
  end: Date;
}

export interface StoreOptions {
  serverUrl: string;
  username?: string;
  password?: string;
  timeoutMs: number;
}

/** 20300101T000000Z: the form CalDAV's time-range wants. */
function davUtc(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

function componentFilter(component: DavComponent, inner: Record<string, unknown> = {}): Record<string, unknown> {
  return { 'comp-filter': { _attributes: { name: 'VCALENDAR' }, 'comp-filter': { _attributes: { name: component }, ...inner } } };
}

function networkCode(err: unknown): string {
  const e = err as { name?: string; code?: unknown; cause?: { code?: unknown; name?: string } } | null;
  if (e?.name === 'TimeoutError' || e?.cause?.name === 'TimeoutError' || e?.name === 'AbortError') return 'TIMEOUT';
  const code = e?.cause?.code ?? e?.code;
  return typeof code === 'string' ? code : 'network error';
}

/** tsdav turns XML text into numbers and booleans where it can; and values may come as CDATA. */
function textOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value && typeof value === 'object') {
    const v = value as { _cdata?: unknown; _text?: unknown };
    if (typeof v._cdata === 'string') return v._cdata;
    if (v._text !== undefined) return textOf(v._text);
  }
  return null;
}

function componentNames(comp: unknown): string[] {
  const items = Array.isArray(comp) ? comp : comp ? [comp] : [];
  return items
    .map((c) => (c as { _attributes?: { name?: unknown } })?._attributes?.name)
    .filter((n): n is string => typeof n === 'string')
    .map((n) => n.toUpperCase());
}

function lastSegment(url: string): string {
  const path = new URL(url).pathname.replace(/\/+$/, '');
  try {
    return decodeURIComponent(path.slice(path.lastIndexOf('/') + 1));
  } catch {
    return path.slice(path.lastIndexOf('/') + 1);
  }
}

function slash(url: string): string {
  return url.endsWith('/') ? url : `${url}/`;
}

export class CalDavStore {
  private readonly client: DAVClient;
  private readonly authHeaders: Record<string, string>;
  private homeUrl: string | null = null;
  private connecting = false;
  private unreachable: DavUnreachable | null = null;

  constructor(private readonly options: StoreOptions) {
    this.authHeaders =
      options.username !== undefined
        ? { authorization: `Basic ${Buffer.from(`${options.username}:${options.password ?? ''}`, 'utf8').toString('base64')}` }
        : {};
    const headers = this.authHeaders;
    this.client = new DAVClient({
      serverUrl: options.serverUrl,
      credentials: {},
      // Our own header: tsdav's Basic helper uses btoa, which fails on non-Latin-1 passwords.
      authMethod: 'Custom',
      authFunction: async () => headers,
      defaultAccountType: 'caldav',
      fetch: this.fetch,
    });
  }

  /**
   * Every request goes through here: a deadline, network failures as DavUnreachable and
   * 401 as DavAuthRejected, whoever made the request (tsdav or this module).
   */
  private readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (this.unreachable) throw this.unreachable;
    let response: Response;
    const scope = scopes.getStore();
    const deadline = init?.signal ?? AbortSignal.timeout(this.options.timeoutMs);
    // The request's own deadline (the core aborts it) cancels this fetch too.
    const signal = scope?.signal ? AbortSignal.any([deadline, scope.signal]) : deadline;
    // Aborted already: this request is never sent (and so never counts as a write).
    if (scope?.signal?.aborted) throw new DavUnreachable('TIMEOUT');
    if (scope && !READ_METHODS.has((init?.method ?? 'GET').toUpperCase())) scope.wrote = true;
    try {
      response = await globalThis.fetch(input, { ...init, signal });
    } catch (err) {
      const failure = new DavUnreachable(networkCode(err));
      if (this.connecting) this.unreachable = failure;
      throw failure;
    }
    if (response.status === 401) {
      await response.body?.cancel().catch(() => undefined);
      throw new DavAuthRejected();
    }
    return response;
  };

  /** Finds the calendar home (well-known URL, current-user-principal, calendar-home-set). */
  async connect(): Promise<void> {
    // tsdav tries the well-known URL twice and swallows failures; once the server proved
    // unreachable, the remaining discovery requests fail at once instead of each waiting.
    this.connecting = true;
    try {
      await this.client.login();
    } finally {
      this.connecting = false;
      this.unreachable = null;
    }
    const home = this.client.account?.homeUrl;
    if (!home) throw new DavHttpError(404, 'finding the calendar home');
    this.homeUrl = slash(home);
  }

  /** The calendar collections of the home that may hold `component`s. */
  async collections(component: DavComponent): Promise<DavCollection[]> {
    const home = this.requireHome();
    const responses = await this.client.propfind({
      url: home,
      props: { 'd:displayname': {}, 'd:resourcetype': {}, 'c:supported-calendar-component-set': {} },
      depth: '1',
    });
    this.check(responses, 'listing the calendars');
    const lists: DavCollection[] = [];
    for (const r of responses) {
      if (!r.href || !r.ok) continue;
      const props = (r.props ?? {}) as Record<string, unknown>;
      const types = props.resourcetype && typeof props.resourcetype === 'object' ? Object.keys(props.resourcetype) : [];
      if (!types.includes('calendar')) continue;
      const set = props.supportedCalendarComponentSet as { comp?: unknown } | undefined;
      const components = componentNames(set?.comp);
      // No component set means the server allows every component type.
      if (components.length > 0 && !components.includes(component)) continue;
      const url = slash(new URL(r.href, home).href);
      if (new URL(url).origin !== new URL(home).origin) continue; // credentials go to the home's server only
      const name = textOf(props.displayname)?.trim() || lastSegment(url);
      lists.push({ name, url });
    }
    return lists.sort((a, b) => a.name.localeCompare(b.name) || a.url.localeCompare(b.url));
  }

  /** A new calendar collection for `component`s, under the path `slug`, shown as `name`. */
  async makeCollection(name: string, slug: string, component: DavComponent): Promise<void> {
    const url = `${this.requireHome()}${encodeURIComponent(slug)}/`;
    const responses = await this.client.makeCalendar({
      url,
      props: {
        'd:displayname': { _text: name },
        'c:supported-calendar-component-set': { 'c:comp': { _attributes: { name: component } } },
      },
    });
    this.check(responses, 'creating the collection');
  }

  /**
   * The objects of a collection holding a `component` (one calendar-query REPORT); with
   * `range`, only those the server says overlap it (recurring ones included).
   */
  async objects(collection: DavCollection, component: DavComponent, range?: DavTimeRange): Promise<StoredObject[]> {
    const inner = range ? { 'time-range': { _attributes: { start: davUtc(range.start), end: davUtc(range.end) } } } : {};
    return this.query(collection, componentFilter(component, inner), 'reading the collection');
  }

  /**
   * The objects of a collection whose `component`'s UID contains `uid` (the caller checks
   * equality); from a server without prop-filter support (a 4xx), the whole collection.
   */
  async findByUid(collection: DavCollection, component: DavComponent, uid: string): Promise<StoredObject[]> {
    const inner = { 'prop-filter': { _attributes: { name: 'UID' }, 'text-match': { _attributes: { collation: 'i;octet' }, _text: uid } } };
    try {
      return await this.query(collection, componentFilter(component, inner), 'searching the collection');
    } catch (err) {
      if (!(err instanceof DavHttpError) || err.status >= 500) throw err;
      return this.objects(collection, component);
    }
  }

  async get(url: string): Promise<StoredObject | null> {
    const response = await this.fetch(url, { method: 'GET', headers: { ...this.authHeaders, accept: 'text/calendar' } });
    if (response.status === 404 || response.status === 410) {
      await response.body?.cancel().catch(() => undefined);
      return null;
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new DavHttpError(response.status, 'reading the object');
    }
    return { url, etag: response.headers.get('etag'), data: await response.text() };
  }

  /** Creates (`etag` null: only if nothing is there) or replaces (only if unchanged) an object. */
  async put(url: string, data: string, etag: string | null, operation: string): Promise<void> {
    const condition: Record<string, string> = etag === null ? { 'if-none-match': '*' } : { 'if-match': etag };
    const response = await this.fetch(url, {
      method: 'PUT',
      headers: { ...this.authHeaders, 'content-type': 'text/calendar; charset=utf-8', ...condition },
      body: data,
    });
    await response.body?.cancel().catch(() => undefined);
    if (response.status === 412) throw new DavConflict();
    if (!response.ok) throw new DavHttpError(response.status, operation);
  }

  /** Deletes an object if unchanged; false when it was already gone. */
  async remove(url: string, etag: string | null): Promise<boolean> {
    const response = await this.fetch(url, { method: 'DELETE', headers: { ...this.authHeaders, ...(etag ? { 'if-match': etag } : {}) } });
    await response.body?.cancel().catch(() => undefined);
    if (response.status === 404 || response.status === 410) return false;
    if (response.status === 412) throw new DavConflict();
    if (!response.ok) throw new DavHttpError(response.status, 'deleting the object');
    return true;
  }

  private async query(collection: DavCollection, filter: unknown, operation: string): Promise<StoredObject[]> {
    const responses = await this.client.calendarQuery({
      url: collection.url,
      props: { 'd:getetag': {}, 'c:calendar-data': {} },
      filters: [filter as Record<string, unknown>],
      depth: '1',
    });
    this.check(responses, operation);
    const objects: StoredObject[] = [];
    for (const r of responses) {
      if (!r.href || !r.ok) continue;
      const props = (r.props ?? {}) as Record<string, unknown>;
      const data = textOf(props.calendarData);
      if (!data) continue;
      const url = new URL(r.href, collection.url).href;
      if (url === collection.url || new URL(url).origin !== new URL(collection.url).origin) continue;
      objects.push({ url, etag: textOf(props.getetag), data });
    }
    return objects;
  }

  /** A multistatus with nothing usable in it and a failure status is a failure. */
  private check(responses: DAVResponse[], operation: string): void {
    if (responses.length === 0) return;
    if (responses.some((r) => r.ok)) return;
    const failed = responses.find((r) => typeof r.status === 'number' && r.status >= 400);
    if (failed) throw new DavHttpError(failed.status!, operation);
  }

  private requireHome(): string {
    if (!this.homeUrl) throw new Error('CalDavStore used before connect()');
    return this.homeUrl;
  }
}

/** Why a CalDAV plugin's initialize failed, as a closed InitError category; the message goes to the audit log only. */
export function davInitFailure(err: unknown): Error {
  if (err instanceof InitError) return err;
  if (err instanceof DavAuthRejected) return new InitError('AUTH_ERROR', 'the CalDAV server rejected username/password (HTTP 401)');
  if (err instanceof DavUnreachable) return new InitError('NETWORK_ERROR', err.message);
  if (err instanceof DavHttpError) {
    if (err.status === 403) return new InitError('AUTH_ERROR', `${err.message}: the account may not read its calendars`);
    if (err.status >= 500) return new InitError('NETWORK_ERROR', err.message);
    return new InitError('CONFIG_ERROR', `${err.message}: check server_url`);
  }
  const message = err instanceof Error ? err.message : String(err);
  if (/principal|homeUrl|home url/i.test(message)) {
    return new InitError('CONFIG_ERROR', 'no CalDAV calendar home found at server_url: check it (e.g. https://host/remote.php/dav for Nextcloud, https://caldav.icloud.com for iCloud)');
  }
  return err instanceof Error ? err : new Error(message);
}
