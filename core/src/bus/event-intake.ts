// What becomes of each event a plugin publishes: accepted (handed to the agents, its key
// remembered so a repeat is refused), refused for good (a plugin without that power by its
// manifest, a bad envelope), or, when only the configuration stands in the way (a group
// its section does not map, a group whose policy does not list it), held (held-events.ts)
// and told: the plugin turns red in the catalog with the reason (the Overview, the Checks
// page), the plugin hears that its event was held, not handled, and once a change to
// carapace.json allows it, it is handled (`retry`). Every outcome is audited.
import { randomUUID } from 'node:crypto';
import type { AuditLog, AuditOutcome } from '../audit/audit-log.js';
import { GROUP_NAME_PATTERN } from '../boundary/session-table.js';
import type { ToolCatalog } from '../plugins/catalog.js';
import type { PublishedEvent } from '../plugins/host-protocol.js';
import type { PluginPowers } from '../plugins/plugin-powers.js';
import { PROTOCOL_VERSION, type EventEnvelope, type JsonObject } from '../protocol/envelope.js';
import { HeldEvents, MAX_HELD_DAYS, MAX_PER_PLUGIN, type HeldEvent } from './held-events.js';
import type { SeenKeys } from './seen-keys.js';

/** Topics a plugin may publish (if its manifest gives it the power: plugin-powers.ts); everything else on the bus is the core's to say. */
const PLUGIN_TOPICS = new Set(['message.inbound', 'task.created', 'task.triggered']);
/** The plugin host names its events with UUIDs: a longer name is not echoed back. */
export const MAX_EVENT_ID = 64;

export interface EventIntakeDeps {
  catalog: ToolCatalog;
  powers: PluginPowers;
  seenKeys: SeenKeys;
  held: HeldEvents;
  audit: AuditLog;
  /** Publishes the accepted event to subscribers and hands it to the agents; returns its envelope. */
  accept(topic: string, group: string, payload: JsonObject, plugin: string): EventEnvelope;
}

/** What the plugin host is told: taken for good, or held for a configuration that allows it (the reason). */
export type Intake = { held?: string };

export class EventIntake {
  /** Events dropped because too many were held, per plugin, since the core started (said with the red state). */
  private readonly overflow = new Map<string, number>();

  private readonly expiry: NodeJS.Timeout;

  constructor(private readonly deps: EventIntakeDeps) {
    this.expire();
    this.expiry = setInterval(() => this.expire(), 3_600_000).unref();
  }

  /** An event from the bus (the core is not stopping). */
  take(topic: string, event: PublishedEvent): Intake {
    const drop = (reason: string, code?: string): Intake => {
      this.auditEvent(topic, event, 'dropped', reason, code);
      return {};
    };
    const { catalog, powers } = this.deps;
    const state = catalog.state(event.plugin);
    if (event.version !== PROTOCOL_VERSION) return drop(`envelope version ${JSON.stringify(event.version ?? null).slice(0, 16)} is not one this core speaks (${PROTOCOL_VERSION})`, 'UNSUPPORTED_VERSION');
    if (!PLUGIN_TOPICS.has(topic)) return drop('plugins may not publish this topic');
    // A starting plugin's events are taken too: the bus and the link are separate sockets, so
    // a plugin's first event (a Telegram message waiting since the last run) can arrive before
    // its init answer, and a plugin may publish from initialize(), which waits for the receipt.
    if (state !== 'healthy' && state !== 'starting') return drop('publisher is not a running plugin');
    if (typeof event.group !== 'string' || !GROUP_NAME_PATTERN.test(event.group)) return drop('invalid group');
    if (typeof event.payload !== 'object' || event.payload === null || Array.isArray(event.payload)) return drop('payload must be an object');
    const name = nameOf(event);
    const refusal = powers.mayPublish(event.plugin, topic, event.group);
    if (refusal) {
      if (!this.hasPowerByManifest(event.plugin, topic)) return drop(refusal, 'UNAUTHORIZED');
      return this.hold(topic, event, name, refusal);
    }
    return this.accept(topic, event, name) ? {} : drop(`a repeat of event ${name!.slice(0, 64)}, already accepted`);
  }

  /** The configuration changed: every held event it allows now is handled, oldest first. */
  retry(): void {
    const { catalog, powers, held } = this.deps;
    for (const h of held.all()) {
      const state = catalog.state(h.plugin);
      if (state !== 'healthy' && state !== 'starting') continue;
      if (powers.mayPublish(h.plugin, h.topic, h.event.group) !== null) continue;
      if (!held.take(h.seq)) continue;
      if (this.accept(h.topic, h.event, h.name, `held event accepted (kept since ${h.at}): the configuration allows it now`)) continue;
      this.auditEvent(h.topic, h.event, 'dropped', `a held event that was accepted meanwhile (${h.name.slice(0, 64)})`);
    }
    this.showHeld();
  }

  /** The person lets `plugin`'s held events go (the Overview): each dropped and audited; how many. */
  discard(plugin: string, by: string): number {
    const gone = this.deps.held.takeAll({ plugin });
    for (const h of gone) this.auditEvent(h.topic, h.event, 'dropped', `held since ${h.at}: discarded by ${by}, never handled`);
    this.overflow.delete(plugin);
    this.showHeld();
    return gone.length;
  }

  /** Held events kept past MAX_HELD_DAYS go, each audited. */
  private expire(now = Date.now()): void {
    const before = new Date(now - MAX_HELD_DAYS * 86_400_000).toISOString();
    for (const h of this.deps.held.takeAll({ before })) this.auditEvent(h.topic, h.event, 'dropped', `held since ${h.at}: no configuration allowed it within ${MAX_HELD_DAYS} days, never handled`);
    this.showHeld();
  }

  /** Hands the event on; false if an event of that name was accepted before. */
  private accept(topic: string, event: PublishedEvent, name: string | null, reason = 'event accepted'): boolean {
    const seen = name === null ? null : `${event.plugin} ${name}`;
    if (seen !== null && this.deps.seenKeys.has(seen)) return false;
    this.auditEvent(topic, event, 'routed', reason);
    this.deps.accept(topic, event.group, event.payload, event.plugin);
    // After its handlers ran (an agent's message is recorded as unfinished by then): a core
    // killed in between takes the event again rather than losing it.
    if (seen !== null) this.deps.seenKeys.add(seen);
    return true;
  }

  private hold(topic: string, event: PublishedEvent, name: string | null, refusal: string): Intake {
    const { held } = this.deps;
    const first = !held.byPlugin().has(event.plugin);
    const reason = `${refusal}: kept, and handled once carapace.json allows it`;
    const fellOut = held.hold(event.plugin, name ?? `#${randomUUID()}`, topic, event, refusal);
    this.auditEvent(topic, event, 'pending', reason, 'UNAUTHORIZED');
    for (const lost of fellOut) this.dropOverflow(lost);
    if (first) {
      this.deps.audit.record({ group: null, session: null, source: event.plugin, topic: null, correlation: null, stage: 'plugin', outcome: 'error', code: 'UNAUTHORIZED', reason: `plugin "${event.plugin}" published for a group the configuration does not allow (${refusal}); its messages are kept until carapace.json allows them: see the Overview` });
    }
    this.showHeld();
    return { held: refusal };
  }

  private dropOverflow(lost: HeldEvent): void {
    this.overflow.set(lost.plugin, (this.overflow.get(lost.plugin) ?? 0) + 1);
    this.auditEvent(lost.topic, lost.event, 'dropped', `dropped: more than ${MAX_PER_PLUGIN} events (or their bytes) of this plugin were kept for a configuration that allows them; the oldest (kept since ${lost.at}) goes`, 'UNAUTHORIZED');
  }

  /** Each plugin's held events as its red state in the catalog (the Overview, the Checks page). */
  private showHeld(): void {
    const { catalog, held } = this.deps;
    const counts = held.byPlugin();
    for (const plugin of catalog.pluginNames()) {
      const h = counts.get(plugin);
      const dropped = this.overflow.get(plugin) ?? 0;
      if (!h) {
        catalog.setRefusing(plugin, null);
        continue;
      }
      const lost = dropped > 0 ? ` (${dropped} older ones were dropped: at most ${MAX_PER_PLUGIN} are kept)` : '';
      catalog.setRefusing(plugin, `${h.count} ${h.count === 1 ? 'message was' : 'messages were'} not handled: ${h.reason}. Kept${lost}; handled once carapace.json allows them`);
    }
  }

  private hasPowerByManifest(plugin: string, topic: string): boolean {
    const { catalog } = this.deps;
    if (topic === 'message.inbound') return catalog.isChannel(plugin);
    return catalog.discovered(plugin)?.manifest.provides.schedules === true;
  }

  close(): void {
    clearInterval(this.expiry);
    this.deps.held.close();
  }

  /** What a plugin's event came to; its fields as the plugin sent them, bounded. */
  auditEvent(topic: string, event: PublishedEvent, outcome: AuditOutcome, reason: string, code?: string): void {
    this.deps.audit.record({ group: typeof event.group === 'string' ? event.group.slice(0, 64) : null, session: null, source: String(event.plugin).slice(0, 64), topic: topic.slice(0, 128), correlation: null, stage: 'event', outcome, reason, ...(code ? { code } : {}) });
  }
}

/** The plugin's own name for an event, else the host's: a repeat either made is refused. */
function nameOf(event: PublishedEvent): string | null {
  return typeof event.key === 'string' ? event.key.slice(0, 128) : typeof event.id === 'string' ? `#${event.id.slice(0, MAX_EVENT_ID)}` : null;
}
