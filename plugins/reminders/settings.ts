// The reminders plugin's configuration, read once at start: the CalDAV account, the list
// used when a call names none, and the lists others write to (what is read from them is
// external content, DESIGN 16).
import { InitError, isKnownTimeZone, type PluginConfig } from '#sdk';

export const normalizeName = (name: string): string => name.trim().normalize('NFC').toLowerCase();

export interface Settings {
  serverUrl: string;
  username?: string;
  password?: string;
  defaultList: string;
  alarmMinutesBefore: number;
  timezone?: string;
  createMissingLists: boolean;
  /** One HTTP request to the CalDAV server; a tool call makes a few at most. */
  requestTimeoutMs: number;
  /** Lists others can write to (normalized names): what is read from them is external content. */
  sharedLists: Set<string>;
}

export function parseSettings(config: PluginConfig): Settings {
  // The host has validated the config against the manifest's config_schema (defaults applied).
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const serverUrl = String(config.server_url ?? '');
  let url: URL;
  try {
    url = new URL(serverUrl);
  } catch {
    throw new InitError('CONFIG_ERROR', 'server_url is not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new InitError('CONFIG_ERROR', 'server_url must start with https:// (or http://)');
  if (url.username || url.password) throw new InitError('CONFIG_ERROR', 'server_url must not contain credentials: put them in username and password');
  const timezone = text(config.timezone);
  if (timezone && !isKnownTimeZone(timezone)) throw new InitError('CONFIG_ERROR', `timezone "${timezone}" is not a known IANA time zone (e.g. Europe/Berlin)`);
  const username = text(config.username);
  const password = text(config.password);
  if (password !== undefined && username === undefined) throw new InitError('CONFIG_ERROR', 'password is set but username is not');
  return {
    serverUrl: url.href,
    username,
    password,
    defaultList: text(config.default_list)?.trim() ?? 'Reminders',
    alarmMinutesBefore: typeof config.alarm_minutes_before === 'number' ? config.alarm_minutes_before : 0,
    timezone,
    createMissingLists: config.create_missing_lists === true,
    requestTimeoutMs: typeof config.request_timeout_ms === 'number' ? config.request_timeout_ms : 10_000,
    sharedLists: new Set((Array.isArray(config.shared_lists) ? config.shared_lists : []).filter((l): l is string => typeof l === 'string' && l.trim() !== '').map(normalizeName)),
  };
}
