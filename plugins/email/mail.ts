// One mail as the agent may see it, from its raw source (mailparser does the MIME): the
// From address and name, subject, a text body (of an HTML mail, the text a reader sees:
// visible-html.ts), attachment names and sizes. As the sender wrote them: what is handed
// out is escaped where it is handed out (external-text.ts). Nothing here decides whether
// it may be shown: see policy.ts.
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { truncate } from '#sdk';
import { visibleText } from './visible-html.js';

export interface MailView {
  from: string | null;
  /** The From header held more or less than one address: never a listed sender. */
  fromCount: number;
  /** From header lines: a mail with two is nobody's. */
  fromLines: number;
  /** The From address's display name ('' when none). */
  fromName: string;
  reply_to: string[];
  to: string[];
  cc: string[];
  subject: string;
  date: string | null;
  message_id: string | null;
  references: string[];
  body: string;
  /** Characters of HTML text a reader would not see, left out of `body`. */
  hiddenChars: number;
  /** What of the HTML's style sheets was not evaluated (visible-html.ts): text it hides may be in `body`. */
  styleGaps: string[];
  truncated: boolean;
  attachments: Array<{ filename: string; size: number; content_type: string }>;
  headerLines: ReadonlyArray<{ key: string; line: string }>;
}

function firstName(field: AddressObject | AddressObject[] | undefined): string {
  const first = field === undefined ? undefined : Array.isArray(field) ? field[0] : field;
  return first?.value[0]?.name ?? '';
}

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const list = field === undefined ? [] : Array.isArray(field) ? field : [field];
  const out: string[] = [];
  const walk = (entries: AddressObject['value']): void => {
    for (const e of entries) {
      if (e.address) out.push(e.address.toLowerCase());
      if (e.group) walk(e.group);
    }
  };
  for (const a of list) walk(a.value);
  return out;
}

/** Bounds on what a mail may put into an event, the console's list and the audit log. */
const MAX_ID_CHARS = 998; // RFC 5322's line limit
const MAX_LIST = 100;
const MAX_HTML_CHARS = 1_000_000;

const capped = <T>(list: T[]): T[] => list.slice(0, MAX_LIST);

/** One parse of one mail; past it the mail is skipped (watcher.ts) or unreadable (tools.ts). */
export const PARSE_MS = 10_000;

export type ParseOutcome = { ok: true; view: MailView } | { ok: false; code: 'PARSE_FAILED' | 'PARSE_TIMEOUT'; reason: string };

/**
 * parseMail as a value, within `timeoutMs`: anyone can send the mail, so a mail mailparser
 * refuses (too many MIME parts, a header too large) or cannot finish in time is an
 * outcome to log and skip, never an exception that stops the sync. The reason names the
 * failure only, never the mail's content. (A timed-out parse is left to end by itself: its
 * memory is bounded by the fetched size.)
 */
export async function parseMailWithin(source: Buffer, maxBodyChars: number, cut: boolean, timeoutMs: number): Promise<ParseOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<ParseOutcome>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, code: 'PARSE_TIMEOUT', reason: `not parsed within ${timeoutMs} ms` }), timeoutMs);
  });
  const parsed = parseMail(source, maxBodyChars, cut).then(
    (view): ParseOutcome => ({ ok: true, view }),
    (err: unknown): ParseOutcome => ({ ok: false, code: 'PARSE_FAILED', reason: truncate(String((err as Error)?.message ?? err), 200) }),
  );
  try {
    return await Promise.race([parsed, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function parseMail(source: Buffer, maxBodyChars: number, cut = false): Promise<MailView> {
  // Attachments are not kept: their names and sizes are enough, and their bytes would cost memory.
  // HTML longer than MAX_HTML_CHARS is not turned into text: the conversion's memory grows
  // many times the HTML's size (9 MB of <br> exhausts a 384 MB heap), and anyone can send it.
  // The HTML is turned into text here, not by mailparser: what a reader would not see is left out.
  const parsed: ParsedMail = await simpleParser(source, { skipImageLinks: true, skipTextLinks: true, keepCidLinks: false, maxHtmlLengthToParse: MAX_HTML_CHARS, skipHtmlToText: true });
  const from = addresses(parsed.from);
  const html = typeof parsed.html === 'string' && parsed.html.length > 0 ? parsed.html : null;
  // A mail client shows the HTML of a mail that has one: so does the agent get it.
  const visible = html !== null && html.length <= MAX_HTML_CHARS ? visibleText(html) : null;
  const unconverted = html !== null && visible === null;
  const text = (visible ? visible.text : parsed.text ?? '').replace(/\r\n/g, '\n').trim();
  const references = parsed.references === undefined ? [] : Array.isArray(parsed.references) ? parsed.references : [parsed.references];
  return {
    from: from.length === 1 ? from[0] : null,
    fromCount: from.length,
    fromLines: parsed.headerLines.filter((h) => h.key.toLowerCase() === 'from').length,
    fromName: truncate(firstName(parsed.from), 200),
    reply_to: capped(addresses(parsed.replyTo)),
    to: capped(addresses(parsed.to)),
    cc: capped(addresses(parsed.cc)),
    subject: truncate(parsed.subject ?? '', 500),
    date: parsed.date ? parsed.date.toISOString() : null,
    message_id: parsed.messageId === undefined ? null : truncate(parsed.messageId, MAX_ID_CHARS),
    references: capped(references).map((r) => truncate(r, MAX_ID_CHARS)),
    body: truncate(text, maxBodyChars),
    hiddenChars: visible?.hiddenChars ?? 0,
    styleGaps: visible?.styleGaps ?? [],
    truncated: cut || text.length > maxBodyChars || unconverted,
    attachments: capped(parsed.attachments).map((a) => ({ filename: truncate(a.filename ?? '(unnamed)', 200), size: a.size, content_type: a.contentType })),
    headerLines: parsed.headerLines,
  };
}
