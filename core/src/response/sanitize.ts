// Response sanitization: defense in depth against handlers that leak credentials.
// Strings anywhere in the value (and object keys) are scrubbed; the paths of what was
// changed are reported so the audit log can say where, never what.

const REDACTED = '[REDACTED]';

// Well-known credential shapes.
const PATTERNS: RegExp[] = [
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
  /\bBearer\s+[A-Za-z0-9\-._~+/]{8,}=*/gi,
  /\bsk-ant-[A-Za-z0-9_-]{10,}/g,
  /\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  /\bglpat-[A-Za-z0-9_-]{20,}/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}/g,
  /\b\d{6,12}:AA[A-Za-z0-9_-]{30,}/g, // Telegram bot token
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, // JWT
  // key=value and "key": "value" forms; the name stays, the value goes.
  /(?<=\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|password|passwd|secret)["']?\s*[:=]\s*["']?)[^\s"',;&]{6,}/gi,
  /(?<=\/\/[^/\s:@]+:)[^/\s@]{3,}(?=@)/g, // credentials in URLs: scheme://user:pass@host
];

/** Secrets shorter than this are not matched verbatim: they would redact ordinary words. */
const MIN_SECRET_LENGTH = 8;

/**
 * No pattern above matches fewer characters (a URL's `//u:pwd@`), nor does a secret, so a
 * shorter string is clean without a regex. Most keys and many values are that short.
 * Tied to MIN_SECRET_LENGTH: shorter secrets must never skip the check.
 */
const SHORTEST_MATCH = Math.min(8, MIN_SECRET_LENGTH);

export interface Sanitized<T> {
  value: T;
  redactedPaths: string[];
}

export type Sanitizer = (<T>(value: T) => Sanitized<T>) & { scrub(text: string): string };

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function createSanitizer(secrets: Iterable<string> = []): Sanitizer {
  const exact = [...new Set(secrets)].filter((s) => s.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  const exactPattern = exact.length > 0 ? new RegExp(exact.map(escapeRegExp).join('|'), 'g') : null;

  // One pass to find out whether any pattern may match: case-insensitive for all, so it
  // matches a superset of what the exact passes below replace. Clean text, the usual
  // case, then costs one scan instead of fifteen.
  const gate = new RegExp([...exact.map(escapeRegExp), ...PATTERNS.map((p) => p.source)].join('|'), 'i');

  const scrub = (text: string): string => {
    if (text.length < SHORTEST_MATCH || !gate.test(text)) return text;
    let out = exactPattern ? text.replace(exactPattern, REDACTED) : text;
    for (const pattern of PATTERNS) {
      out = out.replace(pattern, REDACTED);
    }
    return out;
  };

  const walk = (value: unknown, path: string, paths: string[]): unknown => {
    if (typeof value === 'string') {
      const clean = scrub(value);
      if (clean !== value) paths.push(path || '$');
      return clean;
    }
    if (Array.isArray(value)) return value.map((item, i) => walk(item, `${path}[${i}]`, paths));
    if (value !== null && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        const cleanKey = scrub(key);
        if (cleanKey !== key) paths.push(path ? `${path}.<key>` : '<key>');
        const childPath = path ? `${path}.${cleanKey}` : cleanKey;
        const item = walk((value as Record<string, unknown>)[key], childPath, paths);
        // defineProperty: a key named "__proto__" stays an ordinary own property.
        if (cleanKey === '__proto__') Object.defineProperty(out, cleanKey, { value: item, enumerable: true, writable: true, configurable: true });
        else out[cleanKey] = item;
      }
      return out;
    }
    return value;
  };

  const sanitize = <T>(value: T): Sanitized<T> => {
    const redactedPaths: string[] = [];
    const clean = walk(value, '', redactedPaths) as T;
    return { value: clean, redactedPaths };
  };
  return Object.assign(sanitize, { scrub });
}
