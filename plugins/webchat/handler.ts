// The web chat channel: the console's chat page is this plugin's panel. What the person
// writes becomes message.inbound for the chosen group, exactly like a Telegram message;
// the agent answers with send_webchat through the full pipeline; errors, notices and
// approvals waiting show up in the conversation. The page follows the agent's work
// (state, tool calls) from the console's own event stream. Its history is its own (it
// holds notices and files the core's conversation does not), and follows the core's: what
// the person writes and what send_webchat delivers are exactly what the core keeps, and
// when the conversation is cleared (core: conversation.cleared) the chat is emptied too.
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { bundledPanelFolder, panelPages, readJsonBody, replyJson as reply, ToolError, type CoreServices, type EventEnvelope, type FileRef, type PluginConfig, type PluginHandler, type RequestEnvelope } from '#sdk';
import { ChatHistory } from './history.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'webchat' } }, pino.destination(2));
/** The only sender: the person at the console. */
const SENDER = 'console';
const MAX_TEXT = 8000;
const MAX_BODY_BYTES = 16 * 1024;
const GROUP = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const pages = panelPages(bundledPanelFolder(import.meta.url, 'webchat'), ['chat.js']);

export default class WebChat implements PluginHandler {
  private services!: CoreServices;
  private history!: ChatHistory;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.history = new ChatHistory(services.dataDir, typeof config.history_per_group === 'number' ? config.history_per_group : 200, {
      corrupt: (movedTo) => void services.reportFault(`web chat history was unreadable; moved to ${movedTo}, the chat starts empty`).catch(() => undefined),
      saveFailed: (err) => log.error({ err: err.message }, 'could not save the web chat history (kept in memory)'),
    });
  }

  async handleRequest(envelope: RequestEnvelope): Promise<unknown> {
    const tool = envelope.topic.slice('tool.invoke.'.length);
    if (tool !== 'send_webchat') throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
    // `file`, if any, is the core's FileRef (file_arguments in the manifest), never the agent's path.
    const { recipient, body, file } = envelope.payload.arguments as { recipient: string; body: string; file?: FileRef };
    if (recipient.trim() !== SENDER) throw new ToolError({ message: `recipient must be "${SENDER}", the sender given in the prompt`, retriable: false });
    const message = this.history.add(envelope.group, 'agent', body, file);
    return { id: message.id, delivered: true, ...(file ? { file: { name: file.name, size: file.size, type: file.type } } : {}) };
  }

  async handleEvent(envelope: EventEnvelope): Promise<void> {
    const group = envelope.group;
    if (group === null) return;
    const p = envelope.payload;
    // The person cleared the group's conversation (here with /forget, on another channel, or in the console): the chat forgets it too.
    if (envelope.topic === 'conversation.cleared') this.history.clear(group);
    else if (envelope.topic === 'agent.error') this.history.add(group, 'notice', `The agent could not finish: ${typeof p.reason === 'string' ? p.reason : 'an error'}.`);
    else if (envelope.topic === 'user.notify' && typeof p.text === 'string') this.history.add(group, 'notice', p.text);
    else if (envelope.topic === 'confirmation.requested') this.history.add(group, 'notice', `The agent asks to use ${String(p.tool)}: approve or deny it on the Approvals page.`);
  }

  async shutdown(): Promise<void> {
    this.history?.close();
  }

  /** The panel: the page, the group's history, sending, and the group's live messages. */
  async servePanel(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://panel');
    const group = url.searchParams.get('group') ?? '';
    if (pages(req, res)) return;
    if (url.pathname.startsWith('/api/') && !GROUP.test(group)) return reply(res, 400, { code: 'INVALID_INPUT', message: 'group is a group name' });
    if (req.method === 'GET' && url.pathname === '/api/history') return reply(res, 200, { messages: this.history.list(group) });
    if (req.method === 'GET' && url.pathname === '/api/stream') {
      // The browser's own reconnect sends the newest id it had; `since` is the page's.
      const since = req.headers['last-event-id'] ?? url.searchParams.get('since');
      if (!this.history.follow(res, group, typeof since === 'string' ? since : null)) reply(res, 503, { code: 'UNAVAILABLE', message: 'too many chat pages open; close one' });
      return;
    }
    if (req.method === 'POST' && url.pathname === '/api/send') {
      const body = await readJsonBody(req, MAX_BODY_BYTES);
      const text = typeof body?.text === 'string' ? body.text.trim() : '';
      if (!text || text.length > MAX_TEXT) return reply(res, 400, { code: 'INVALID_INPUT', message: `text: 1 to ${MAX_TEXT} characters` });
      const message = this.history.add(group, 'user', text);
      await this.services.publish('message.inbound', group, { channel: 'webchat', sender: SENDER, content_type: 'text', body: text, metadata: { message_id: message.id } }, { key: message.id });
      return reply(res, 202, { id: message.id });
    }
    reply(res, 404, { code: 'NOT_FOUND', message: 'no such page' });
  }
}
