// Reminders over CalDAV: the lists of Apple Reminders (iCloud), Nextcloud Tasks, Fastmail or
// Radicale are calendar collections of VTODOs. A list is found by its display name; a
// reminder's id is its VTODO UID, which this plugin resolves to the object's URL itself.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import {
  escapeText,
  formatIso,
  ToolError,
  truncate,
  type CoreServices,
  type PluginConfig,
  type PluginHandler,
  type RequestContext,
  type RequestEnvelope,
  type CheckConnections,
} from '#sdk';
import {
  CalDavStore,
  checkCalDav,
  DavAuthRejected,
  DavConflict,
  davInitFailure,
  davRequest,
  DavHttpError,
  DavUnreachable,
  LabelledUids,
  type CalendarTime,
  type DavCollection,
  type StoredObject,
} from '#sdk/calendar';
import { alarmTime, buildTodo, completeTodo, isDone, parseTodo, type ParsedTodo } from './ical.js';
import { normalizeName, parseSettings, type Settings } from './settings.js';

type ReminderList = DavCollection;
type DueValue = CalendarTime;

interface Located {
  list: ReminderList;
  object: StoredObject;
  todo: ParsedTodo;
}

const log = pino({ base: { service: 'plugin-host', plugin: 'reminders' } }, pino.destination(2));

/** The Checks page's connection test: the CalDAV server reached, the login taken, the reminder lists listed. */
export const checkConnections: CheckConnections = (config, context) => checkCalDav(config, context, 'VTODO');

/** list_reminders returns at most this many (open ones first). */
const MAX_LISTED = 200;
const MAX_NOTES_LISTED = 1000;
const MAX_UID = 255;


const quoteList = (lists: ReminderList[]): string => (lists.length === 0 ? '(none)' : lists.map((l) => `"${l.name}"`).join(', '));
/** The agent's own input, shortened, for messages. */
const shown = (value: string): string => JSON.stringify(truncate(value, 80));

export default class RemindersPlugin implements PluginHandler {
  private settings!: Settings;
  private store!: CalDavStore;
  private lists: ReminderList[] = [];
  /** reminder_id → where it was last seen; verified on every use. */
  private readonly seen = new Map<string, string>();
  /** Reminders written for a session that had read external content: external whenever read. */
  private labelled!: LabelledUids;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.settings = parseSettings(config);
    this.labelled = new LabelledUids(services.dataDir, (err) => log.error({ err: err.message }, 'could not save which reminders are labelled external'));
    const loaded = this.labelled.load();
    if (loaded.movedAside) log.warn({ moved_to: loaded.movedAside }, 'the file of labelled reminders was unreadable: moved aside; reminders it named are no longer labelled');
    this.store = new CalDavStore({
      serverUrl: this.settings.serverUrl,
      username: this.settings.username,
      password: this.settings.password,
      timeoutMs: this.settings.requestTimeoutMs,
    });
    try {
      await this.store.connect();
      this.lists = await this.store.collections('VTODO');
    } catch (err) {
      throw davInitFailure(err);
    }
    if (!this.findList(this.settings.defaultList) && !this.settings.createMissingLists) {
      log.warn({ default_list: this.settings.defaultList, lists: this.lists.map((l) => l.name) }, 'default_list does not exist on the server: reminders without a list will be refused');
    }
    log.info({ lists: this.lists.length }, 'connected to the CalDAV server');
  }

  async handleRequest(envelope: RequestEnvelope, context?: RequestContext): Promise<unknown> {
    return davRequest(context?.signal, () => this.dispatch(envelope), toolError);
  }

  private async dispatch(envelope: RequestEnvelope): Promise<unknown> {
    const args = envelope.payload.arguments;
    const tool = envelope.topic.slice('tool.invoke.'.length);
    switch (tool) {
      case 'create_reminder':
        // What a session that read external content writes may carry a stranger's words.
        return await this.create(args, envelope.external_content === true);
      case 'list_reminders':
        return await this.listReminders(typeof args.list === 'string' ? args.list : undefined, args.include_completed === true);
      case 'complete_reminder':
        return await this.complete(String(args.reminder_id));
      case 'delete_reminder':
        return await this.remove(String(args.reminder_id));
      default:
        throw new ToolError({ message: `unknown tool ${tool}`, retriable: false });
    }
  }

  /** For delete_reminder's prompt: which reminder the id names, as the server has it now. */
  async describeCall(tool: string, args: Record<string, unknown>): Promise<string[]> {
    if (tool !== 'delete_reminder') return [];
    let found: Located;
    try {
      found = await this.locate(String(args.reminder_id));
    } catch (err) {
      if (err instanceof ToolError) return [`No reminder has this id: nothing would be deleted.`];
      throw err;
    }
    const { todo, list } = found;
    const due = this.formatDue(todo.due);
    return [
      `The reminder "${truncate(todo.summary, 300)}" in the list "${list.name}"${due ? `, due ${due}` : ', no due date'}${isDone(todo) ? ' (completed)' : ''}${todo.recurring ? ', repeating' : ''}`,
      ...(todo.description ? [`Its notes: ${truncate(todo.description, 600)}`] : []),
    ];
  }

  // ---- tools ------------------------------------------------------------------------------

  private async create(args: Record<string, unknown>, labelled: boolean): Promise<unknown> {
    const title = String(args.title ?? '').trim();
    if (!title) throw new ToolError({ message: 'title is empty', retriable: false });
    const notes = typeof args.notes === 'string' && args.notes.trim() ? args.notes : undefined;
    let due: Date | undefined;
    if (typeof args.due === 'string') {
      const ms = Date.parse(args.due.trim().toUpperCase().replace(' ', 'T'));
      if (!Number.isFinite(ms)) {
        throw new ToolError({ message: `due ${shown(args.due)} is not a valid date-time: use ISO 8601 with an offset, e.g. 2026-03-01T17:00:00+01:00`, retriable: false });
      }
      due = new Date(ms);
    }
    const list = await this.listFor(typeof args.list === 'string' ? args.list : undefined, this.settings.createMissingLists);
    const uid = randomUUID();
    const now = new Date();
    const url = `${list.url}${uid}.ics`;
    if (labelled) this.labelled.add(uid); // before the write: a label never comes late
    await this.store.put(url, buildTodo({ uid, title, notes, due, alarmMinutesBefore: this.settings.alarmMinutesBefore, now }), null, 'creating the reminder');
    this.seen.set(uid, url);
    const result: Record<string, unknown> = { reminder_id: uid, status: 'created', list: list.name, title };
    if (due) {
      result.due = formatIso(due.getTime(), this.settings.timezone);
      result.alarm_at = formatIso(alarmTime(due, this.settings.alarmMinutesBefore).getTime(), this.settings.timezone);
      if (due.getTime() < now.getTime()) result.warning = 'due is in the past';
    }
    return result;
  }

  private async listReminders(name: string | undefined, includeCompleted: boolean): Promise<unknown> {
    const list = await this.listFor(name, false);
    const todos: ParsedTodo[] = [];
    for (const object of await this.store.objects(list, 'VTODO')) {
      const todo = parseTodo(object.data, this.settings.timezone);
      if (!todo) continue;
      this.seen.set(todo.uid, object.url);
      if (includeCompleted || !isDone(todo)) todos.push(todo);
    }
    todos.sort(byUrgency);
    const reminders = todos.slice(0, MAX_LISTED).map((t) => this.present(t, this.external(t, list)));
    const result: Record<string, unknown> = { list: list.name, count: todos.length, reminders };
    // The core labels the reading session (DESIGN 16).
    if (reminders.some((r) => r.external === true)) result.external_content = true;
    if (todos.length > MAX_LISTED) result.truncated = `only the first ${MAX_LISTED} are shown (open ones first, earliest due first)`;
    return result;
  }

  private async complete(id: string): Promise<unknown> {
    return retryOnceOnConflict(async () => {
      const { todo, list, object } = await this.locate(id);
      const base = this.named(todo, list);
      if (isDone(todo)) return { ...base, status: 'already_completed' };
      if (todo.recurring) {
        throw new ToolError({
          message: 'This reminder repeats; completing one occurrence is not supported here. Ask the user to tick it off in their reminders app.',
          retriable: false,
        });
      }
      const now = new Date();
      const edited = completeTodo(object.data, now);
      if (!edited) throw new ToolError({ message: 'This reminder could not be read; ask the user to complete it in their reminders app.', retriable: false });
      await this.store.put(object.url, edited, object.etag, 'completing the reminder');
      return { ...base, status: 'completed', completed_at: formatIso(now.getTime(), this.settings.timezone) };
    });
  }

  private async remove(id: string): Promise<unknown> {
    return retryOnceOnConflict(async () => {
      const { todo, list, object } = await this.locate(id);
      const base = this.named(todo, list);
      await this.store.remove(object.url, object.etag);
      this.seen.delete(todo.uid);
      this.labelled.remove(todo.uid);
      return { ...base, status: 'deleted' };
    });
  }

  // ---- lists and reminders -------------------------------------------------------------------

  private findList(name: string): ReminderList | undefined {
    const exact = this.lists.find((l) => l.name === name);
    if (exact) return exact;
    const wanted = normalizeName(name);
    const matches = this.lists.filter((l) => normalizeName(l.name) === wanted);
    return matches.length === 1 ? matches[0] : undefined;
  }

  /** The list called `name` (default: default_list); the server is asked again before giving up. */
  private async listFor(name: string | undefined, create: boolean): Promise<ReminderList> {
    const wanted = (name ?? this.settings.defaultList).trim();
    if (!wanted) throw new ToolError({ message: 'list is empty', retriable: false });
    let list = this.findList(wanted);
    if (list) return list;
    this.lists = await this.store.collections('VTODO');
    list = this.findList(wanted);
    if (list) return list;
    if (create) {
      await this.store.makeCollection(wanted, randomUUID(), 'VTODO');
      this.lists = await this.store.collections('VTODO');
      list = this.findList(wanted);
      if (list) {
        log.info('created a missing reminders list');
        return list;
      }
    }
    throw new ToolError({
      message: `There is no reminders list named ${shown(wanted)}. Available lists: ${quoteList(this.lists)}. Use one of these names${create ? '' : ', or ask the user to create the list'}.`,
      retriable: false,
    });
  }

  /** The reminder with this id (its VTODO UID), wherever it is. */
  private async locate(id: string): Promise<Located> {
    const uid = id.trim();
    const notFound = (): ToolError =>
      new ToolError({
        message: `No reminder has the id ${shown(id)}. Use list_reminders (include_completed: true for finished ones) to get the current reminder_id values.`,
        retriable: false,
      });
    // eslint-disable-next-line no-control-regex
    if (!uid || uid.length > MAX_UID || /[\u0000-\u001f\u007f]/.test(uid)) throw notFound();

    const cached = this.seen.get(uid);
    if (cached) {
      const object = await this.store.get(cached);
      const todo = object && parseTodo(object.data, this.settings.timezone);
      const list = this.lists.find((l) => cached.startsWith(l.url));
      if (object && todo?.uid === uid && list) return { list, object, todo };
      this.seen.delete(uid);
    }

    const searched = new Set<string>();
    for (let round = 0; round < 2; round++) {
      if (round === 1) this.lists = await this.store.collections('VTODO'); // perhaps in a list made since
      for (const list of this.lists) {
        if (searched.has(list.url)) continue;
        searched.add(list.url);
        const found = await this.searchList(list, uid);
        if (found) {
          this.seen.set(uid, found.object.url);
          return found;
        }
      }
    }
    throw notFound();
  }

  private async searchList(list: ReminderList, uid: string): Promise<Located | null> {
    for (const object of await this.store.findByUid(list, 'VTODO', uid)) {
      const todo = parseTodo(object.data, this.settings.timezone);
      if (todo?.uid === uid) return { list, object, todo };
    }
    return null;
  }

  /** Why a reminder is external content, or null where it is the person's own. */
  private external(todo: ParsedTodo, list: ReminderList): string | null {
    if (this.labelled.has(todo.uid)) return 'written for a session that had read external content';
    if (this.settings.sharedLists.has(normalizeName(list.name))) return `in "${list.name}", a list others write to`;
    return null;
  }

  /** A reminder as complete_reminder and delete_reminder name it: an external one labelled, as list_reminders would. */
  private named(todo: ParsedTodo, list: ReminderList): Record<string, unknown> {
    const reason = this.external(todo, list);
    return { reminder_id: todo.uid, list: list.name, title: this.present(todo, reason).title, ...(reason ? { external_content: true } : {}) };
  }

  /** An external reminder's text escaped as a stranger's (the approval prompts' own sanitizer), and labelled. */
  private present(todo: ParsedTodo, external: string | null = null): Record<string, unknown> {
    const text = external ? (s: string) => escapeText(s) : (s: string) => s;
    const out: Record<string, unknown> = { reminder_id: todo.uid, title: text(todo.summary) };
    const due = this.formatDue(todo.due);
    if (due) {
      out.due = due;
      if (todo.due?.kind === 'date') out.all_day = true;
    }
    if (todo.description) out.notes = text(truncate(todo.description, MAX_NOTES_LISTED));
    const done = isDone(todo);
    out.completed = done;
    if (done) {
      const at = this.formatDue(todo.completed);
      if (at) out.completed_at = at;
      if (todo.status === 'CANCELLED') out.cancelled = true;
    }
    if (todo.priority !== null) out.priority = todo.priority <= 4 ? 'high' : todo.priority === 5 ? 'medium' : 'low';
    if (todo.recurring) out.repeats = true;
    if (external) {
      out.external = true;
      out.external_why = external;
    }
    return out;
  }

  private formatDue(value: DueValue | null): string | null {
    if (!value) return null;
    return value.kind === 'date' ? value.date : formatIso(value.ms, this.settings.timezone);
  }
}

/** Open before done; then the earliest due first (undated last); done ones latest first. */
function byUrgency(a: ParsedTodo, b: ParsedTodo): number {
  const doneA = isDone(a);
  const doneB = isDone(b);
  if (doneA !== doneB) return doneA ? 1 : -1;
  const when = (v: DueValue | null): number => (!v ? Number.POSITIVE_INFINITY : v.kind === 'instant' ? v.ms : Date.parse(`${v.date}T00:00:00Z`));
  if (doneA) return when(b.completed) - when(a.completed) || a.summary.localeCompare(b.summary);
  return when(a.due) - when(b.due) || a.summary.localeCompare(b.summary);
}

/**
 * A read-modify-write of one reminder, run again once when the server says it changed
 * meanwhile (ETag mismatch, DavConflict: only put and remove raise it): read again, retry.
 */
async function retryOnceOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    if (err instanceof DavConflict) return attempt();
    throw err;
  }
}

/** What the agent sees: actionable, never a URL, a path or a credential. */
function toolError(err: unknown): unknown {
  if (err instanceof ToolError) return err;
  if (err instanceof DavUnreachable) return new ToolError({ message: 'The reminders server is unreachable right now; try again in a few minutes.', retriable: true });
  if (err instanceof DavAuthRejected) {
    return new ToolError({ message: 'The reminders server no longer accepts the configured username or password; the owner has to update the reminders settings.', retriable: false });
  }
  if (err instanceof DavConflict) return new ToolError({ message: 'The reminder was changed elsewhere at the same moment; try again.', retriable: true });
  if (err instanceof DavHttpError) {
    if (err.status === 403) return new ToolError({ message: 'The reminders server does not allow this change (the list may be read-only or shared).', retriable: false });
    if (err.status === 507) return new ToolError({ message: 'The reminders account is out of storage space.', retriable: false });
    if (err.status >= 500) return new ToolError({ message: `The reminders server failed (HTTP ${err.status}); try again later.`, retriable: true });
    return new ToolError({ message: `The reminders server refused the request (HTTP ${err.status}).`, retriable: false });
  }
  return err;
}
