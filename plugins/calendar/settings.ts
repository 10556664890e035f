// The calendar plugin's configuration, read once at start: the CalDAV account, and per
// group the calendars it may use (by display name or URL), its zone and working hours.
// A group the configuration does not name has no calendar at all.
import { InitError, isKnownTimeZone, type PluginConfig } from '#sdk';
import type { WorkingHours } from './free-time.js';

export interface GroupSettings {
  /** Display names or URLs, as configured. */
  calendars: string[];
  /** Those of them others can write to (refKey): what is read from them is external content. */
  shared: Set<string>;
  defaultCalendar?: string;
  timezone?: string;
  hours: WorkingHours;
}

export interface Settings {
  serverUrl: string;
  username?: string;
  password?: string;
  requestTimeoutMs: number;
  groups: Map<string, GroupSettings>;
  /** The person's own addresses (lower case): an event another address organizes is an invitation, external content. */
  ownAddresses: Set<string>;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);

function zone(value: unknown, where: string): string | undefined {
  const tz = text(value);
  if (tz && !isKnownTimeZone(tz)) throw new InitError('CONFIG_ERROR', `${where}: "${tz}" is not a known IANA time zone (e.g. Europe/Berlin)`);
  return tz;
}

function hours(value: unknown, fallback: WorkingHours, where: string): WorkingHours {
  const h = value && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  const result = { start: text(h.start) ?? fallback.start, end: text(h.end) ?? fallback.end };
  if (result.end <= result.start) throw new InitError('CONFIG_ERROR', `${where}: working_hours end must be after start`);
  return result;
}

/** A calendar reference as compared: a URL as given (with a final slash), a name trimmed, NFC, lower case. */
export function refKey(ref: string): string {
  const t = ref.trim();
  if (/^https?:\/\//i.test(t) || t.startsWith('/')) return t.endsWith('/') ? t : `${t}/`;
  return t.normalize('NFC').toLowerCase();
}

export function parseSettings(config: PluginConfig): Settings {
  // The host validated the config against the manifest's config_schema (defaults applied).
  let url: URL;
  try {
    url = new URL(String(config.server_url ?? ''));
  } catch {
    throw new InitError('CONFIG_ERROR', 'server_url is not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new InitError('CONFIG_ERROR', 'server_url must start with https:// (or http://)');
  if (url.username || url.password) throw new InitError('CONFIG_ERROR', 'server_url must not contain credentials: put them in username and password');
  const username = text(config.username);
  const password = typeof config.password === 'string' && config.password !== '' ? config.password : undefined;
  if (password !== undefined && username === undefined) throw new InitError('CONFIG_ERROR', 'password is set but username is not');
  const timezone = zone(config.timezone, 'timezone');
  const defaultHours = hours(config.working_hours, { start: '09:00', end: '17:00' }, 'working_hours');
  const groups = new Map<string, GroupSettings>();
  const configured = config.groups && typeof config.groups === 'object' ? (config.groups as Record<string, unknown>) : {};
  for (const [group, value] of Object.entries(configured)) {
    const g = (value ?? {}) as Record<string, unknown>;
    const calendars = Array.isArray(g.calendars) ? g.calendars.filter((c): c is string => typeof c === 'string' && c.trim() !== '') : [];
    const defaultCalendar = text(g.default_calendar);
    if (defaultCalendar && !calendars.some((c) => refKey(c) === refKey(defaultCalendar))) {
      throw new InitError('CONFIG_ERROR', `groups.${group}.default_calendar must be one of that group's calendars`);
    }
    const shared = Array.isArray(g.shared_calendars) ? g.shared_calendars.filter((c): c is string => typeof c === 'string' && c.trim() !== '') : [];
    for (const c of shared) {
      if (!calendars.some((own) => refKey(own) === refKey(c))) throw new InitError('CONFIG_ERROR', `groups.${group}.shared_calendars: "${c}" is not one of that group's calendars`);
    }
    groups.set(group, {
      calendars,
      shared: new Set(shared.map(refKey)),
      defaultCalendar,
      timezone: zone(g.timezone, `groups.${group}.timezone`) ?? timezone,
      hours: hours(g.working_hours, defaultHours, `groups.${group}`),
    });
  }
  return {
    serverUrl: url.href,
    username,
    password,
    requestTimeoutMs: typeof config.request_timeout_ms === 'number' ? config.request_timeout_ms : 10_000,
    groups,
    ownAddresses: ownAddresses(config.own_addresses, username),
  };
}

/** As configured; without a list, the user name when it is an address (iCloud's Apple ID, Fastmail's login). */
function ownAddresses(value: unknown, username: string | undefined): Set<string> {
  const listed = Array.isArray(value) ? value.filter((a): a is string => typeof a === 'string' && a.trim() !== '') : username?.includes('@') ? [username] : [];
  return new Set(listed.map(mailAddress));
}

/** "mailto:Ana@Example.org" and "ana@example.org" alike. */
export function mailAddress(value: string): string {
  return value.trim().replace(/^mailto:/i, '').toLowerCase();
}
