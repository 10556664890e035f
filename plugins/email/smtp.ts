// Sending through the configured SMTP server (nodemailer). An abort before the connection
// opens sent nothing; after that the server may have taken the mail, so the result is unknown.
// Where a connection broke is told apart by what nodemailer logged (smtp-phase.ts): its
// own error says "ECONNECTION" whether the server was never reached or the connection
// broke after the mail was handed over.
import nodemailer from 'nodemailer';
import { AbortedBeforeActing, ToolError } from '#sdk';
import type { Server } from './settings.js';
import { SmtpPhase } from './smtp-phase.js';

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
  const phase = new SmtpPhase();
  const transport = nodemailer.createTransport({
    ...phase.options,
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
    const broke = e.code === 'ECONNECTION' || e.code === 'EDNS' || e.code === 'ETIMEDOUT' || e.code === 'ESOCKET';
    // The mail's data was on its way (DATA sent) when the connection broke or stalled: the server may have taken it.
    if (broke && phase.dataSent) {
      throw new ToolError({ code: 'RESULT_UNKNOWN', message: 'the connection to the SMTP server broke while the mail was being handed over: it may or may not have gone out. Do not send it again unless the person asks', retriable: false });
    }
    if (broke && !phase.connected) throw new ToolError({ code: 'UNREACHABLE', message: 'the SMTP server could not be reached; nothing was sent', retriable: true });
    if (broke) throw new ToolError({ code: 'CONNECTION_LOST', message: 'the connection to the SMTP server broke before the mail was handed over; nothing was sent', retriable: true });
    if (typeof e.responseCode === 'number') {
      throw new ToolError({ code: 'SMTP_REFUSED', message: `the SMTP server refused the mail (${e.responseCode})`, retriable: e.responseCode < 500 });
    }
    throw err;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    transport.close();
  }
}
