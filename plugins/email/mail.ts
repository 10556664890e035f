// One mail as the agent may see it, from its raw source (mailparser does the MIME): the
// From address, subject, a text body (HTML turned into text by mailparser), attachment
// names and sizes. Nothing here decides whether it may be shown: see policy.ts.
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { truncate } from '#sdk';

export interface MailView {
  from: string | null;
  /** The From header held more or less than one address: never a listed sender. */
  fromCount: number;
  reply_to: string[];
  to: string[];
  cc: string[];
  subject: string;
  date: string | null;
  message_id: string | null;
  references: string[];
  body: string;
  truncated: boolean;
  attachments: Array<{ filename: string; size: number; content_type: string }>;
  headerLines: ReadonlyArray<{ key: string; line: string }>;
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

export async function parseMail(source: Buffer, maxBodyChars: number, cut = false): Promise<MailView> {
  // Attachments are not kept: their names and sizes are enough, and their bytes would cost memory.
  const parsed: ParsedMail = await simpleParser(source, { skipImageLinks: true, skipTextLinks: true, keepCidLinks: false });
  const from = addresses(parsed.from);
  const text = (parsed.text ?? '').replace(/\r\n/g, '\n').trim();
  const references = parsed.references === undefined ? [] : Array.isArray(parsed.references) ? parsed.references : [parsed.references];
  return {
    from: from.length === 1 ? from[0] : null,
    fromCount: from.length,
    reply_to: addresses(parsed.replyTo),
    to: addresses(parsed.to),
    cc: addresses(parsed.cc),
    subject: truncate(parsed.subject ?? '', 500),
    date: parsed.date ? parsed.date.toISOString() : null,
    message_id: parsed.messageId ?? null,
    references,
    body: truncate(text, maxBodyChars),
    truncated: cut || text.length > maxBodyChars,
    attachments: parsed.attachments.map((a) => ({ filename: truncate(a.filename ?? '(unnamed)', 200), size: a.size, content_type: a.contentType })),
    headerLines: parsed.headerLines,
  };
}
