// The memory plugin: typed, per-group memories in SQLite (one file per group), searched
// with FTS5, summarised for the agent's CLAUDE.md through the memory_brief hook.
// Everything about who wrote an entry comes from the request envelope; the agent supplies
// only type, content, tags and what the entry supersedes.
import { isAbsolute, resolve } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { InitError, ToolError, type CoreServices, type MemoryBrief, type PluginConfig, type PluginHandler, type RequestEnvelope } from '#sdk';
import { DamagedDatabaseError, InvalidGroupError, isCorruption, MemoryDatabases } from './databases.js';
import { SessionLimits, type LimitKind } from './limits.js';
import { serveMemoryPanel } from './panel.js';
import { SchemaTooNewError } from './schema.js';
import { emptyBrief, ENTRY_TYPES, MAX_TAGS, MemoryInputError, type Brief, type EntryType } from './store.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'memory' } }, pino.destination(2));
const DAY_MS = 86_400_000;

export interface MemorySettings {
  storageDir: string;
  maxBriefEntries: number;
  maxBriefChars: number;
  purgeSupersededDays: number;
}

function integer(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? Math.max(0, Math.floor(value)) : fallback;
}

/** The host has validated config against the manifest's config_schema and applied defaults. */
export function parseSettings(config: PluginConfig, dataDir: string): MemorySettings {
  const path = typeof config.storage_path === 'string' && config.storage_path.trim() ? config.storage_path.trim() : null;
  return {
    // A relative storage_path is taken relative to the plugin's data directory.
    storageDir: path === null ? dataDir : isAbsolute(path) ? path : resolve(dataDir, path),
    maxBriefEntries: integer(config.max_brief_entries, 50),
    maxBriefChars: integer(config.max_brief_chars, 10_000),
    purgeSupersededDays: integer(config.purge_superseded_days, 90),
  };
}

const LIMIT_MESSAGES: Record<LimitKind, (limit: number, frees: string) => string> = {
  store: (n, frees) => `Memory limit reached: at most ${n} memory_store calls per session in any hour, all used. Nothing was stored; the next one is possible at ${frees}.`,
  supersede: (n, frees) =>
    `Memory limit reached: at most ${n} supersessions per session in any hour, all used. Nothing was stored; store it without "supersedes" (the old entry stays current) or wait until ${frees}.`,
  delete: (n, frees) => `Memory limit reached: at most ${n} memory_delete calls per session in any hour, all used. Nothing was deleted; the next one is possible at ${frees}.`,
};

const UNREADABLE_NEWER =
  "This group's memory was written by a newer version of Carapace and this version cannot read it. Tell the user the operator needs to update Carapace.";

export default class MemoryPlugin implements PluginHandler {
  private settings!: MemorySettings;
  private databases!: MemoryDatabases;
  private services!: CoreServices;
  private readonly limits = new SessionLimits();

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.settings = parseSettings(config, services.dataDir);
    this.services = services;
    if (config.embedding_provider !== undefined && config.embedding_provider !== 'none') {
      log.warn({ embedding_provider: config.embedding_provider }, 'embedding_provider is not supported in this version; using full-text search');
    }
    try {
      this.databases = new MemoryDatabases(this.settings.storageDir);
    } catch (err) {
      throw new InitError('CONFIG_ERROR', `memory storage directory ${this.settings.storageDir} is not usable: ${(err as Error).message}`);
    }
    // Every existing database is opened now: migrated forward, checked, and purged of entries
    // superseded more than purge_superseded_days ago. A database written by a newer schema
    // stops the plugin, so an older handler never writes to it.
    const before = new Date(Date.now() - this.settings.purgeSupersededDays * DAY_MS).toISOString();
    const groups = this.databases.existingGroups();
    for (const group of groups) {
      const file = this.databases.fileOf(group);
      try {
        const db = this.databases.get(group, false)!;
        if (db.foundVersion !== db.version) log.info({ group, from: db.foundVersion, to: db.version }, 'memory database migrated');
        if (db.journalMode !== 'wal') log.warn({ group, journal_mode: db.journalMode }, 'WAL mode is not available for this database');
        const purged = db.purgeSuperseded(before);
        log.info({ group, purged, older_than_days: this.settings.purgeSupersededDays }, 'purged superseded memory entries');
      } catch (err) {
        if (err instanceof DamagedDatabaseError || isCorruption(err)) {
          // One group's broken file must not take memory away from every group.
          await this.reportDamage(err instanceof DamagedDatabaseError ? err : this.databases.markDamaged(group, (err as Error).message));
          continue;
        }
        this.databases.closeAll();
        if (err instanceof SchemaTooNewError) {
          throw new InitError(
            'CONFIG_ERROR',
            `${file} has memory schema version ${err.found}, newer than the ${err.known} this memory plugin knows (was it written by a newer Carapace?). Refusing to start rather than risk corrupting it: update Carapace, or move the file away.`,
          );
        }
        throw new InitError('INTERNAL_ERROR', `${file} could not be opened: ${(err as Error).message}`);
      }
    }
    log.info({ storage: this.settings.storageDir, groups: groups.length }, 'memory ready');
  }

  private async reportDamage(damage: DamagedDatabaseError): Promise<void> {
    log.error({ group: damage.group, file: damage.file, err: damage.reason }, 'memory database damaged: memory is unavailable for this group');
    await this.services
      .reportFault(`memory database ${damage.file} of group "${damage.group}" is damaged (${damage.reason}); that group's memory is unavailable until the file is repaired or moved away, and other groups are unaffected`, damage.group)
      .catch((err: unknown) => log.error({ err: String(err) }, 'could not report the damaged database'));
  }

  async handleRequest(envelope: RequestEnvelope): Promise<unknown> {
    const tool = envelope.topic.slice('tool.invoke.'.length);
    const args = envelope.payload.arguments;
    try {
      switch (tool) {
        case 'memory_store':
          return this.store(envelope, args);
        case 'memory_search':
          return this.search(envelope.group, args);
        case 'memory_brief':
          return this.brief(envelope.group, args.include_provenance === true);
        case 'memory_delete':
          return this.delete(envelope, args);
        default:
          throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
      }
    } catch (err) {
      // Damage found in use (not at start-up): that group's memory goes off, loudly.
      const damage = isCorruption(err) ? this.databases.markDamaged(envelope.group, (err as Error).message) : null;
      if (damage) await this.reportDamage(damage);
      throw toolError(damage ?? err);
    }
  }

  async getBrief(group: string): Promise<MemoryBrief> {
    try {
      return this.brief(group, false);
    } catch (err) {
      if (err instanceof SchemaTooNewError) throw new Error('memory database schema is newer than this plugin');
      if (err instanceof InvalidGroupError) throw new Error('invalid group name');
      throw err;
    }
  }

  async shutdown(): Promise<void> {
    this.databases?.closeAll();
  }

  /** The console's memory page (panel.ts). */
  servePanel(req: IncomingMessage, res: ServerResponse): Promise<void> {
    return serveMemoryPanel(this.databases, req, res);
  }

  // ---- tools -----------------------------------------------------------------------------

  private store(envelope: RequestEnvelope, args: Record<string, unknown>): unknown {
    const session = envelope.source;
    const supersedes = typeof args.supersedes === 'string' ? args.supersedes : null;
    const needed: LimitKind[] = supersedes === null ? ['store'] : ['store', 'supersede'];
    const exhausted = this.limits.exhausted(session, ...needed);
    if (exhausted) throw this.limitReached(session, exhausted);
    const db = this.databases.get(envelope.group, true)!;
    const stored = db.store({
      type: String(args.type) as EntryType,
      content: String(args.content ?? ''),
      tags: Array.isArray(args.tags) ? args.tags.map(String) : [],
      supersedes,
      provenance: { session_id: session, group: envelope.group, timestamp: envelope.timestamp, correlation: envelope.correlation ?? null, external: envelope.external_content === true },
    });
    this.limits.consume(session, ...needed);
    const { correlation: _correlation, ...provenance } = stored.provenance;
    return { ...stored, provenance };
  }

  private limitReached(session: string, kind: LimitKind): ToolError {
    const frees = `${new Date(this.limits.freesAt(session, kind)).toISOString().slice(11, 16)} UTC`;
    return new ToolError({ message: LIMIT_MESSAGES[kind](this.limits.limit(kind), frees), retriable: false });
  }

  private search(group: string, args: Record<string, unknown>): unknown {
    const tags = Array.isArray(args.tags) ? args.tags.map(String) : [];
    if (tags.length > MAX_TAGS) throw new ToolError({ message: `Filter by at most ${MAX_TAGS} tags.`, retriable: false });
    const type = typeof args.type === 'string' && (ENTRY_TYPES as readonly string[]).includes(args.type) ? (args.type as EntryType) : undefined;
    const db = this.databases.get(group, false);
    if (!db) return { results: [] };
    const results = db.search({
      query: typeof args.query === 'string' ? args.query : undefined,
      tags,
      type,
      includeSuperseded: args.include_superseded === true,
      limit: typeof args.limit === 'number' ? args.limit : 20,
    });
    // Entries a labelled session stored: the session that reads them is labelled too (the core reads this).
    return results.some((r) => r.provenance.external) ? { results, external_content: true } : { results };
  }

  private brief(group: string, includeProvenance: boolean): Brief & { external_content?: true } {
    const db = this.databases.get(group, false);
    if (!db) return emptyBrief();
    const brief = db.brief({ maxEntries: this.settings.maxBriefEntries, maxChars: this.settings.maxBriefChars, includeProvenance });
    return brief.entries.some((e) => e.external) ? { ...brief, external_content: true } : brief;
  }

  private delete(envelope: RequestEnvelope, args: Record<string, unknown>): unknown {
    const session = envelope.source;
    const id = String(args.id ?? '');
    if (!this.limits.allows(session, 'delete')) throw this.limitReached(session, 'delete');
    const db = this.databases.get(envelope.group, false);
    if (!db?.delete(id)) {
      throw new ToolError({ message: `No memory entry "${id.slice(0, 100)}" exists in this group (find ids with memory_search). Nothing was deleted.`, retriable: false });
    }
    this.limits.consume(session, 'delete');
    return { id, deleted: true };
  }
}

/** What the agent may see: its own mistakes, plainly; never SQL, paths or stack traces. */
function toolError(err: unknown): unknown {
  if (err instanceof ToolError) return err;
  if (err instanceof MemoryInputError) return new ToolError({ message: err.message, retriable: false });
  if (err instanceof SchemaTooNewError) return new ToolError({ message: UNREADABLE_NEWER, retriable: false });
  if (err instanceof InvalidGroupError) return new ToolError({ message: 'This group cannot hold memories (its name is not valid).', retriable: false });
  if (err instanceof DamagedDatabaseError) return new ToolError({ message: "This group's memory is unavailable: its database on the host is damaged. Tell the user; the operator has been alerted.", retriable: false });
  const raw = (err as { code?: unknown } | null)?.code;
  const code = typeof raw === 'string' ? raw : '';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return new ToolError({ message: 'Memory storage is busy; try again in a moment.', retriable: true });
  if (code === 'SQLITE_FULL') return new ToolError({ message: "The host's disk is full, so nothing could be stored. Tell the user.", retriable: false });
  if (code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_IOERR')) {
    log.error({ code, err: (err as Error).message }, 'memory storage failed');
    return new ToolError({ message: 'Memory storage is unavailable on the host right now. Tell the user if it persists.', retriable: true });
  }
  log.error({ err }, 'memory request failed');
  return err; // a crash: the agent sees only "Internal plugin error"
}
