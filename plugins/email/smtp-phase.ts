// How far an SMTP send got, from what nodemailer logs (it says "ECONNECTION" alike for a
// server never reached and a connection that broke after DATA): whether the connection was
// established, and whether DATA was sent (from then on the server may have taken the mail).
// nodemailer's debug log holds the SMTP conversation; it is read here for those two facts
// and kept nowhere.
type Log = (meta: unknown, message: unknown, ...args: unknown[]) => void;

export class SmtpPhase {
  connected = false;
  dataSent = false;

  /** For nodemailer.createTransport: a logger of this phase's own, with the conversation. */
  get options(): { logger: Record<'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal', Log>; debug: true } {
    const note: Log = (meta, message) => {
      const tnx = (meta as { tnx?: unknown } | null)?.tnx;
      const text = String(message);
      if (tnx === 'network' && text.includes('established')) this.connected = true;
      if (tnx === 'client' && /^DATA\b/i.test(text)) this.dataSent = true;
    };
    const none: Log = () => undefined;
    return { logger: { trace: none, debug: note, info: note, warn: none, error: none, fatal: none }, debug: true };
  }
}
