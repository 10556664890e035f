// Sending through the configured SMTP server (nodemailer). An abort before the connection
// opens sent nothing; after that the server may have taken the mail, so the result is unknown.
import nodemailer from 'nodemailer';
import { AbortedBeforeActing, ToolError } from '#sdk';
import type { Server } from './settings.js';

export interface Outgoing {
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  text: string;
  inReplyTo?: string;
  references?: string[];
}

export interface SendResult {
  message_id: string;
  accepted: string[];
  rejected: string[];
}

export async function sendMail(server: Server, proxy: string | undefined, mail: Outgoing, signal: AbortSignal | undefined): Promise<SendResult> {
  if (signal?.aborted) throw new AbortedBeforeActing();
  const transport = nodemailer.createTransport({
    host: server.host,
    port: server.port,
    secure: server.secure,
    auth: { user: server.user, pass: server.password },
    ...(proxy ? { proxy } : {}),
    connectionTimeout: 30_000,
    greetingTimeout: 15_000,
    socketTimeout: 60_000,
    // Nothing of a mail is read from files or URLs: the text is the agent's, as given.
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const onAbort = (): void => transport.close();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const info = await transport.sendMail({
      from: mail.from,
      to: mail.to,
      cc: mail.cc,
      bcc: mail.bcc,
      subject: mail.subject,
      text: mail.text,
      ...(mail.inReplyTo ? { inReplyTo: mail.inReplyTo } : {}),
      ...(mail.references?.length ? { references: mail.references } : {}),
    });
    const list = (v: unknown): string[] => (Array.isArray(v) ? v.map((a) => (typeof a === 'string' ? a : String((a as { address?: string }).address ?? ''))) : []);
    return { message_id: String(info.messageId ?? ''), accepted: list(info.accepted), rejected: list(info.rejected) };
  } catch (err) {
    if (signal?.aborted) throw new ToolError({ code: 'RESULT_UNKNOWN', message: 'the send was cut off at its deadline: the mail may or may not have gone out. Do not send it again unless the person asks', retriable: false });
    const e = err as { code?: string; responseCode?: number; message?: string };
    if (e.code === 'EAUTH') throw new ToolError({ code: 'AUTH_ERROR', message: 'the SMTP server refused the configured login', retriable: false });
    if (e.code === 'ECONNECTION' || e.code === 'EDNS') {
      throw new ToolError({ code: 'UNREACHABLE', message: 'the SMTP server could not be reached; nothing was sent', retriable: true });
    }
    // The connection broke or stalled once open: the server may have taken the mail.
    if (e.code === 'ETIMEDOUT' || e.code === 'ESOCKET') {
      throw new ToolError({ code: 'RESULT_UNKNOWN', message: 'the connection to the SMTP server broke: the mail may or may not have gone out. Do not send it again unless the person asks', retriable: false });
    }
    if (typeof e.responseCode === 'number') {
      throw new ToolError({ code: 'SMTP_REFUSED', message: `the SMTP server refused the mail (${e.responseCode})`, retriable: e.responseCode < 500 });
    }
    throw err;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    transport.close();
  }
}
