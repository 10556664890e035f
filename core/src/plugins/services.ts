// Core services for plugins (getAuditLog, getToolCatalog, getSessionInfo, confirmations,
// notifyUser, reportFault, reportMigration, readFile), answered by the core on the plugin host's behalf.
import type { AuditLog, AuditQuery } from '../audit/audit-log.js';
import { GROUP_NAME_PATTERN, type SessionTable } from '../boundary/session-table.js';
import type { Confirmations } from '../confirm/confirmations.js';
import type { GroupAuthorizer } from '../pipeline/authorize.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ToolCatalog } from './catalog.js';
import type { PluginHostLink } from './host-link.js';
import type { PluginPowers } from './plugin-powers.js';
import type { CoreToHost, HostToCore } from './host-protocol.js';
import { migrationText } from '../state/format-migrations.js';

type ServiceResult = Extract<CoreToHost, { t: 'service_result' }>;

const AUDIT_FILTER_KEYS = ['correlation', 'topic', 'outcome', 'last_n', 'since', 'until'] as const;

export interface ServiceDeps {
  hostLink: PluginHostLink;
  catalog: ToolCatalog;
  audit: AuditLog;
  sessions: SessionTable;
  authorizer: GroupAuthorizer;
  powers: PluginPowers;
  confirmations: Confirmations;
  /** Answers a pending confirmation (and with allow hours, makes the approval stand). */
  answerConfirmation: (id: string, approve: boolean, by: string, allowHours?: number, hash?: string) => { answered: boolean; stale?: boolean };
  /** A channel plugin's chat wants pairing: the code to tell it, or null. */
  requestPairing: (plugin: string, chat: string, details: { name?: string; text?: string }) => { code: string; expires_at: string } | null;
  /** Publishes an event from `source` to the group's other subscribers. */
  publish: (topic: string, group: string, payload: JsonObject, source: string) => void;
  /** A file the core kept (files/file-store.ts), its bytes; null when it has none by that id. */
  readFile: (id: string) => { name: string; type: string; bytes: Buffer } | null;
}

/** Answers a plugin's service call: scoped to the request it runs under, never to a group the caller merely names. */
export function answerService(m: Extract<HostToCore, { t: 'service' }>, deps: ServiceDeps): ServiceResult {
  const fail = (message: string, code?: string): ServiceResult => ({ t: 'service_result', sid: m.sid, ok: false, message, ...(code ? { code } : {}) });
  /** A power the plugin does not have: refused with a code, and audited (a plugin trying it is news). */
  const refuse = (group: string | null, reason: string): ServiceResult => {
    deps.audit.record({ group, session: null, source: m.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'rejected', code: 'UNAUTHORIZED', reason: `${m.method} refused: ${reason}` });
    return fail(reason, 'UNAUTHORIZED');
  };
  const ok = (value: unknown): ServiceResult => ({ t: 'service_result', sid: m.sid, ok: true, value });
  const request = m.rid ? deps.hostLink.requestContext(m.rid) : undefined;
  if (request && request.plugin !== m.plugin) return fail('request context belongs to another plugin');
  /** Runs `answer` for a call made while handling a request; refuses any other. */
  const inRequest = (answer: (r: NonNullable<typeof request>) => ServiceResult): ServiceResult =>
    request ? answer(request) : fail(`${m.method} is only available while handling a request`);
  /** Runs `answer` for the call's group if the plugin may see it; refuses any other. */
  const inVisibleGroup = (answer: (group: string) => ServiceResult): ServiceResult =>
    m.group && deps.authorizer.pluginMaySee(m.plugin, m.group) ? answer(m.group) : fail('plugin may not see this group');
  switch (m.method) {
    case 'getToolCatalog':
      return ok(deps.catalog.available());
    case 'getAuditLog':
      return inRequest(({ group }) => {
        const query: AuditQuery = { group };
        for (const key of AUDIT_FILTER_KEYS) if (m.args[key] !== undefined) Object.assign(query, { [key]: m.args[key] });
        return ok(deps.audit.query(query));
      });
    case 'getSessionInfo':
      return inRequest(({ group, session }) =>
        ok({ group, session_start: deps.sessions.get(session)?.startedAt ?? null, plugins: deps.catalog.health() }),
      );
    case 'listConfirmations': {
      const group = m.group !== null && GROUP_NAME_PATTERN.test(m.group) ? m.group : null;
      if (group === null) return fail('no valid group named');
      const refusal = deps.powers.mayAnswerConfirmations(m.plugin, group);
      return refusal ? refuse(group, refusal) : ok(deps.confirmations.list(group));
    }
    case 'confirmationStatus': {
      // Another group's confirmation reads as unknown: a plugin learns nothing of groups it may not see.
      const status = deps.confirmations.status(String(m.args.id));
      if (status.state !== 'unknown' && !deps.authorizer.pluginMaySee(m.plugin, status.group)) return ok({ state: 'unknown' });
      return ok(status);
    }
    case 'notifyUser':
      // A plugin tells a person something (a paused task, say) through the group's channels.
      return inVisibleGroup((group) => {
        deps.publish('user.notify', group, { text: String(m.args.text ?? '').slice(0, 4000), from: m.plugin }, m.plugin);
        deps.audit.record({ group, session: null, source: m.plugin, topic: 'user.notify', correlation: null, stage: 'event', outcome: 'routed', reason: 'notice for the group' });
        return ok(true);
      });
    case 'reportFault':
      // Something broken that the plugin contains but cannot repair (a corrupt file): a person must see it.
      deps.audit.record({ group: m.group && deps.authorizer.pluginMaySee(m.plugin, m.group) ? m.group : null, session: null, source: m.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'error', severity: 'CRITICAL', reason: String(m.args.message ?? '').slice(0, 2000) });
      return ok(true);
    case 'reportMigration': {
      // A stored file of the plugin's (or the host's) brought to the current format: Activity says so.
      const { file, from, to } = m.args;
      if (typeof file !== 'string' || !Number.isSafeInteger(from) || !Number.isSafeInteger(to)) return fail('reportMigration takes file, from and to');
      deps.audit.record({ group: null, session: null, source: m.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'ok', reason: migrationText({ file: file.slice(-300), from: from as number, to: to as number }) });
      return ok(true);
    }
    case 'readFile':
      // Only a file the request being handled hands this plugin (its file arguments): never one by a guessed id.
      return inRequest(({ group, files }) => {
        const id = String(m.args.id ?? '');
        if (!files?.includes(id)) return refuse(group, 'that file was not given to this request');
        const file = deps.readFile(id);
        return file ? ok({ name: file.name, type: file.type, size: file.bytes.length, base64: file.bytes.toString('base64') }) : fail('that file is no longer kept');
      });
    case 'requestPairing': {
      // Only a channel can have chats; what it says of one is cut short, never trusted further.
      if (!deps.catalog.isChannel(m.plugin)) return fail('only channel plugins may ask for pairing');
      const chat = m.args.chat;
      if (typeof chat !== 'string' || chat.length === 0 || chat.length > 64) return fail('chat must be a string of 1 to 64 characters');
      const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
      return ok(deps.requestPairing(m.plugin, chat, { name: text(m.args.name), text: text(m.args.text) }));
    }
    case 'resolveConfirmation': {
      // A person's answer (and a standing approval) comes only through a channel, for its own chats.
      if (!deps.catalog.isChannel(m.plugin)) return refuse(null, 'only a channel plugin (provides.channels) may answer confirmations');
      // Unknown, answered, expired, or not the group the plugin says it answers for: "nothing to resolve".
      const pending = deps.confirmations.get(String(m.args.id));
      if (!pending || (m.group !== null && m.group !== pending.group)) return ok(false);
      const refusal = deps.powers.mayAnswerConfirmations(m.plugin, pending.group);
      if (refusal) return refuse(pending.group, refusal);
      const hours = typeof m.args.allow_hours === 'number' ? m.args.allow_hours : undefined;
      // A button carries a prefix of the hash of what it was shown under: another is "stale".
      const hash = typeof m.args.hash === 'string' ? m.args.hash : undefined;
      const answer = deps.answerConfirmation(pending.id, m.args.approve === true, `${m.plugin}:${String(m.args.by ?? 'user')}`, hours, hash);
      return ok(answer.stale ? 'stale' : answer.answered);
    }
  }
}
