// The email channel: authenticated mail from listed senders in a group's folders starts
// that group's agent (watcher.ts); tools search, read, file, send and reply, each checked
// against the calling group's configuration (tools.ts). Which sends need a person's yes is
// decided by the core from the manifest (low_risk_recipients), never here. The console's
// email page (panel.ts) lists what reached each group's agent and what it sent (recent-mail.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { InitError, ToolError, type CoreServices, type JsonObject, type PluginConfig, type PluginHandler, type RequestContext, type RequestEnvelope } from '#sdk';
import { approvalOf } from './approval.js';
import { external } from './external-text.js';
import { serveEmailPanel } from './panel.js';
import { RecentMail } from './recent-mail.js';
import { SenderChecks } from './sender-checks.js';
import { parseSettings, type Settings } from './settings.js';
import { SyncState } from './sync-state.js';
import { describeSend, markEmail, readEmail, replyEmail, searchEmail, sendEmail, type ToolContext } from './tools.js';
import { Watcher, type Seen } from './watcher.js';

/** The Checks page's connection test (IMAP login and listing, SMTP greeting and login): run in a process of this plugin's own. */
export { checkConnections } from './connection-check.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'email' } }, pino.destination(2));

type Tool = (ctx: ToolContext, args: JsonObject) => Promise<unknown>;
const TOOLS: Record<string, Tool> = {
  search_email: searchEmail,
  read_email: readEmail,
  mark_email: markEmail,
  send_email: sendEmail,
  reply_email: replyEmail,
};

export default class EmailChannel implements PluginHandler {
  private settings!: Settings;
  private services!: CoreServices;
  private checks!: SenderChecks;
  private watcher: Watcher | null = null;
  private recent!: RecentMail;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.settings = parseSettings(config);
    this.checks = new SenderChecks(this.settings.dnsResolverUrl);
    this.recent = new RecentMail(services.dataDir);
    const lost = this.recent.load(this.settings.mailboxes.keys()).movedAside;
    if (lost) log.warn({ moved_to: lost }, 'the console\'s list of recent mail was corrupt; moved aside: it starts empty');
    const state = new SyncState(services.dataDir);
    const moved = state.load().movedAside;
    if (moved) {
      log.error({ moved_to: moved }, 'the saved sync state was corrupt; moved aside: mail already there is not replayed');
      await services.reportFault('email: the saved sync state was corrupt and was moved aside; mail that arrived meanwhile may not have started the agent');
    }
    for (const [sender, group] of this.settings.senders) {
      if (!this.settings.mailboxes.has(group)) log.warn({ group }, `a listed sender's group has no mailbox configured: its mail is ignored`);
      void sender;
    }
    this.watcher = new Watcher(
      this.settings,
      state,
      this.checks,
      services.egressProxy,
      (group, payload, key) => services.publish('message.inbound', group, payload, { key }),
      // A mail the core keeps for a configuration that allows it started no turn: the page says why.
      (seen) => this.noteReceived(seen, seen.held === undefined),
      (group, notice) => void services.notifyUser(group, notice).catch((err: unknown) => log.warn({ err: String(err) }, 'could not tell the group of a skipped mail')),
    );
    try {
      await this.watcher.start();
    } catch (err) {
      throw initFailure(err);
    }
    log.info({ folders: [...this.settings.mailboxes.values()].flatMap((m) => m.folders).length, senders: this.settings.senders.size }, 'connected; watching for mail');
  }

  async handleRequest(envelope: RequestEnvelope, context?: RequestContext): Promise<unknown> {
    const tool = envelope.topic.slice('tool.invoke.'.length);
    const run = Object.hasOwn(TOOLS, tool) ? TOOLS[tool] : undefined;
    if (!run) throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
    const ctx: ToolContext = {
      ...this.context(envelope.group, context?.signal),
      onRead: (folder, uid, view) => this.noteReceived({ group: envelope.group, folder, uid, view }, false),
      onSent: (sent, mail, result) => this.noteSent(envelope, sent, mail.to, mail.cc, mail.bcc, mail.subject, result.message_id),
      onFailed: (tool, mail, err) => {
        if ((err as Error)?.name === 'AbortedBeforeActing') return; // nothing was tried
        const e = err as { code?: unknown; message?: unknown };
        this.recent.failed(envelope.group, { tool, to: mail.to, cc: mail.cc, bcc: mail.bcc, subject: mail.subject, at: new Date().toISOString(), code: err instanceof ToolError ? err.code : typeof e?.code === 'string' ? e.code : 'HANDLER_ERROR', message: String(e?.message ?? err).split('\n', 1)[0].slice(0, 500) });
      },
    };
    try {
      return await run(ctx, envelope.payload.arguments);
    } catch (err) {
      throw toolError(err, context?.signal);
    }
  }

  async describeCall(tool: string, args: JsonObject, group: string): Promise<string[]> {
    if (tool !== 'send_email' && tool !== 'reply_email') return [];
    return describeSend(this.context(group, AbortSignal.timeout(5000)), tool, args);
  }

  async shutdown(): Promise<void> {
    await this.watcher?.stop();
  }

  servePanel(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return serveEmailPanel(() => [...this.settings.mailboxes.keys()], this.recent, req, res);
  }

  /** For the console's page only: a failure to note it costs the page a line, never the mail. */
  private noteReceived({ group, folder, uid, view, held }: Seen, started: boolean): void {
    try {
      // As the agent got them: escaped (the page shows the same text).
      this.recent.received(group, { folder, uid, from: external(view.from ?? ''), subject: external(view.subject), date: view.date, started, read: !started && held === undefined, hidden_chars: view.hiddenChars, ...(view.styleGaps.length > 0 ? { styles_not_evaluated: view.styleGaps } : {}), ...(held === undefined ? {} : { held }) });
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not note the mail for the console\'s page');
    }
  }

  private async noteSent(envelope: RequestEnvelope, tool: 'send_email' | 'reply_email', to: string[], cc: string[], bcc: string[], subject: string, messageId: string): Promise<void> {
    const at = new Date().toISOString();
    try {
      const approval = await approvalOf(this.services, envelope);
      this.recent.sent(envelope.group, { tool, to, cc, bcc, subject, message_id: messageId, at, ...approval });
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not note the sent mail for the console\'s page');
    }
  }

  private context(group: string, signal: AbortSignal | undefined): ToolContext {
    return { settings: this.settings, checks: this.checks, proxy: this.services.egressProxy, group, signal };
  }
}

/** imapflow's failures as the agent should hear them: what to do, never the server's words. */
function toolError(err: unknown, signal: AbortSignal | undefined): unknown {
  if (err instanceof ToolError || (err as Error)?.name === 'AbortedBeforeActing') return err;
  const e = err as { authenticationFailed?: boolean; code?: string; serverResponseCode?: string; message?: string };
  if (e?.authenticationFailed) return new ToolError({ code: 'AUTH_ERROR', message: 'the IMAP server refused the configured login', retriable: false });
  if (signal?.aborted) return new ToolError({ code: 'TIMEOUT', message: 'the mail server did not answer in time', retriable: true });
  if (e?.serverResponseCode === 'NONEXISTENT' || e?.serverResponseCode === 'TRYCREATE') return new ToolError({ code: 'FOLDER_MISSING', message: 'the server has no such folder', retriable: false });
  if (e?.code === 'ECONNREFUSED' || e?.code === 'ETIMEDOUT' || e?.code === 'ENOTFOUND' || e?.code === 'NoConnection') {
    return new ToolError({ code: 'UNREACHABLE', message: 'the mail server could not be reached', retriable: true });
  }
  return err;
}

function initFailure(err: unknown): Error {
  const e = err as { authenticationFailed?: boolean; code?: string; message?: string };
  if (e?.authenticationFailed) return new InitError('AUTH_ERROR', 'the IMAP server refused the configured user and password');
  if (e?.code === 'ECONNREFUSED' || e?.code === 'ETIMEDOUT' || e?.code === 'ENOTFOUND' || e?.code === 'EHOSTUNREACH') return new InitError('NETWORK_ERROR', `the IMAP server could not be reached (${e.code})`);
  return err instanceof Error ? err : new Error(String(err));
}
