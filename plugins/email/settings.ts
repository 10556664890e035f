// The plugin's configuration as the handler uses it. The host validated it against the
// manifest's config_schema (defaults applied); addresses are compared lower-cased.
import type { PluginConfig } from '#sdk';
import type { Verifier } from './auth-results.js';

export interface Server {
  host: string;
  port: number;
  secure: boolean;
  user: string;
  password: string;
}

export interface Mailbox {
  folders: string[];
  recipients: Set<string>;
  recipientsOnly: boolean;
  moveTo: string[];
  automated: boolean;
}

export interface Settings {
  imap: Server;
  smtp: Server;
  address: string;
  /** Where the receiving server's verdict on a sender is (a second opinion that may refuse), or null: none is read. */
  verifier: Verifier | null;
  /** The DNS-over-HTTPS resolver (JSON API) the DKIM keys and DMARC policies are looked up with. */
  dnsResolverUrl: string;
  /** sender address → group */
  senders: Map<string, string>;
  mailboxes: Map<string, Mailbox>;
  pollIntervalMs: number;
  maxBodyChars: number;
  maxMessageBytes: number;
}

/** Where DKIM keys and DMARC policies are looked up when the settings name no resolver. */
export const DEFAULT_RESOLVER = 'https://cloudflare-dns.com/dns-query';

export const normalAddress = (value: string): string => value.trim().toLowerCase();

function server(raw: unknown, defaultPort: number): Server {
  const s = raw as Record<string, unknown>;
  const secure = s.secure !== false;
  return {
    host: String(s.host),
    port: typeof s.port === 'number' ? s.port : secure ? defaultPort : defaultPort === 993 ? 143 : 587,
    secure,
    user: String(s.user),
    password: String(s.password),
  };
}

export function parseSettings(config: PluginConfig): Settings {
  const senders = new Map<string, string>();
  for (const [address, group] of Object.entries((config.chats ?? {}) as Record<string, string>)) senders.set(normalAddress(address), group);
  const mailboxes = new Map<string, Mailbox>();
  for (const [group, raw] of Object.entries((config.mailboxes ?? {}) as Record<string, Record<string, unknown>>)) {
    const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
    const folders = strings(raw.folders);
    mailboxes.set(group, {
      folders: folders.length > 0 ? folders : ['INBOX'],
      recipients: new Set(strings(raw.recipients).map(normalAddress)),
      recipientsOnly: raw.recipients_only === true,
      moveTo: strings(raw.move_to),
      automated: raw.automated === true,
    });
  }
  return {
    imap: server(config.imap, 993),
    smtp: server(config.smtp, 465),
    address: String(config.address),
    verifier: typeof config.authserv_id === 'string' ? { authservId: config.authserv_id.toLowerCase(), split: config.authserv_split === true } : null,
    dnsResolverUrl: typeof config.dns_resolver_url === 'string' ? config.dns_resolver_url : DEFAULT_RESOLVER,
    senders,
    mailboxes,
    pollIntervalMs: (typeof config.poll_interval_s === 'number' ? config.poll_interval_s : 60) * 1000,
    maxBodyChars: typeof config.max_body_chars === 'number' ? config.max_body_chars : 20_000,
    maxMessageBytes: typeof config.max_message_bytes === 'number' ? config.max_message_bytes : 10 * 1024 * 1024,
  };
}

/** Every folder some group watches, each once, in configuration order. */
export function watchedFolders(settings: Settings): string[] {
  return [...new Set([...settings.mailboxes.values()].flatMap((m) => m.folders))];
}
