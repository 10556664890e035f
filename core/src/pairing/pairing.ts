// Pairing, closed by default: a chat no group knows is never answered by an agent. Its
// channel plugin asks for a pairing request and tells the chat the code; the owner
// approves it (console, admin API or CLI) into an existing or a new group, or refuses it.
// An approval is written to carapace.json (config-writer.ts) and applied at once: the
// group exists for the agent manager and the authorizer, and the channel plugin hears
// `pairing.approved` and maps the chat. Every step is audited.
import type { AuditLog } from '../audit/audit-log.js';
import type { CoreConfig } from '../config.js';
import type { JsonObject } from '../protocol/envelope.js';
import { addChat } from './config-writer.js';
import { PairingRequests, type PairingRequest } from './pairing-requests.js';

export type { PairingRequest };

export interface PairingDeps {
  /** The running configuration: an approval adds to it in place. */
  config: CoreConfig;
  /** carapace.json; without it nothing can be approved (tests that need no pairing). */
  configFile: string | null;
  audit: AuditLog;
  publish: (topic: string, group: string, payload: JsonObject) => void;
  /** A plugin's section changed in place (the plugin hears `pairing.approved` and maps the chat itself). */
  sectionChanged?: (plugin: string) => void;
}

export type PairingAnswer = { ok: true; request: PairingRequest; group: string } | { ok: false; code: string; message: string };

export class Pairing {
  private readonly requests: PairingRequests;

  constructor(
    private readonly deps: PairingDeps,
    requests = new PairingRequests(),
  ) {
    this.requests = requests;
  }

  /** A channel plugin's request for a chat: the code to tell it, or null (refused lately). */
  request(plugin: string, chat: string, details: { name?: string; text?: string }): { code: string; expires_at: string } | null {
    const made = this.requests.request(plugin, chat, details);
    if (!made) return null;
    if (made.fresh) {
      this.deps.audit.record({ group: null, session: null, source: plugin, topic: null, correlation: null, stage: 'event', outcome: 'pending', reason: `pairing requested by ${plugin} chat ${chat}${made.request.name ? ` (${made.request.name})` : ''}: code ${made.request.code}` });
    }
    return { code: made.request.code, expires_at: made.request.expires_at };
  }

  list(): PairingRequest[] {
    return this.requests.list();
  }

  approve(code: string, group: string, create: boolean, by: string): PairingAnswer {
    const request = this.requests.get(code);
    if (!request) return { ok: false, code: 'NOT_FOUND', message: 'no such pairing request (approved, refused or expired)' };
    if (!this.deps.configFile) return { ok: false, code: 'UNAVAILABLE', message: 'this core has no configuration file to write' };
    const change = addChat(this.deps.configFile, request.plugin, request.chat, group, create);
    if (!change.ok) return change;
    this.requests.remove(request.code);
    const { config } = this.deps;
    if (!Object.hasOwn(config.groups, group)) config.groups[group] = change.config.groups[group];
    config.plugins[request.plugin] = change.config.plugins[request.plugin];
    this.deps.sectionChanged?.(request.plugin);
    this.deps.audit.record({ group, session: null, source: by, topic: null, correlation: null, stage: 'event', outcome: 'ok', reason: `pairing ${request.code} approved by ${by}: ${request.plugin} chat ${request.chat} → group ${group}${create ? ' (new)' : ''}; carapace.json written${change.backup ? `, previous kept as ${change.backup}` : ''}` });
    this.deps.publish('pairing.approved', group, { plugin: request.plugin, chat: request.chat });
    return { ok: true, request, group };
  }

  refuse(code: string, by: string): PairingRequest | null {
    const request = this.requests.refuse(code);
    if (request) this.deps.audit.record({ group: null, session: null, source: by, topic: null, correlation: null, stage: 'event', outcome: 'rejected', reason: `pairing ${request.code} refused by ${by}: ${request.plugin} chat ${request.chat}` });
    return request;
  }
}
