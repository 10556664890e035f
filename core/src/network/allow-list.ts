// The hosts a plugin may reach: those its manifest names (`network.hosts`) and the servers
// its configuration names at the manifest's `network.config_hosts` pointers (a CalDAV
// URL, an IMAP host). "host" allows any port of it, "host:port" that port, "*.example.com"
// any host under example.com; a URL its port (or its scheme's). Nothing declared: nothing.
import type { JsonObject } from '../protocol/envelope.js';

const SCHEME_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'imap:': '143', 'imaps:': '993', 'smtp:': '25', 'smtps:': '465' };

export class AllowList {
  constructor(private readonly entries: ReadonlySet<string>) {}

  static from(network: { hosts: string[]; config_hosts: string[] } | undefined, config: JsonObject): AllowList {
    const entries = new Set<string>();
    for (const host of network?.hosts ?? []) entries.add(host.toLowerCase());
    for (const pointer of network?.config_hosts ?? []) {
      const value = at(config, pointer);
      for (const v of Array.isArray(value) ? value : [value]) {
        const entry = typeof v === 'string' ? hostEntry(v) : null;
        if (entry) entries.add(entry);
      }
    }
    return new AllowList(entries);
  }

  /** `target` as a CONNECT names it: "host:port" or "[v6]:port". */
  allows(target: string): boolean {
    const split = splitTarget(target);
    if (!split) return false;
    if (this.entries.has(split.host) || this.entries.has(`${split.host}:${split.port}`)) return true;
    const labels = split.host.split('.');
    for (let i = 1; i < labels.length - 1; i++) {
      const wildcard = `*.${labels.slice(i).join('.')}`;
      if (this.entries.has(wildcard) || this.entries.has(`${wildcard}:${split.port}`)) return true;
    }
    return false;
  }

  get hosts(): string[] {
    return [...this.entries];
  }
}

export function splitTarget(target: string): { host: string; port: string } | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]{1,253}):([0-9]{1,5})$/.exec(target);
  return m ? { host: m[1].toLowerCase(), port: m[2] } : null;
}

/** A configured server as an allow-list entry: a URL's host and port, or "host[:port]" as given. */
function hostEntry(value: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    try {
      const url = new URL(value);
      const port = url.port || SCHEME_PORTS[url.protocol];
      return url.hostname ? (port ? `${url.hostname.toLowerCase()}:${port}` : url.hostname.toLowerCase()) : null;
    } catch {
      return null;
    }
  }
  return /^[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$/.test(value) ? value.toLowerCase() : null;
}

/** A JSON pointer's value in `config` (RFC 6901 without escapes: the manifest's pattern allows none). */
function at(config: JsonObject, pointer: string): unknown {
  let node: unknown = config;
  for (const key of pointer.split('/').slice(1)) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}
