// Scheduled agent sessions. A task belongs to the group whose agent created it (or to
// the group the operator configured it for); when due, the plugin publishes
// task.triggered for that group and the core starts the group's agent with the prompt.
// Results come back as agent.completed / agent.error carrying the task id: repeated
// failures pause a recurring task and tell the group's people.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import cron, { type ScheduledTask } from 'node-cron';
import pino from 'pino';
import {
  InitError,
  ToolError,
  type CoreServices,
  type EventEnvelope,
  type JsonObject,
  type PluginConfig,
  type PluginHandler,
  type RequestEnvelope,
  truncate,
} from '#sdk';
import { listTasks } from './listing.js';
import { serveTasksPanel } from './panel.js';
import { parseSettings, type Settings } from './settings.js';
import { StateFileError, TaskStore, type OneShotCounts, type TaskRecord } from './store.js';
import { cronProblem, nextRunAfter, nextRunFromNow, parseRunAt, shortestGapSeconds } from './time.js';

const log = pino({ base: { service: 'plugin-host', plugin: 'tasks' } }, pino.destination(2));

/** node-cron's own messages (a missed run after a long stall, ...) go to the host's log, not stdout. */
const cronLogger = {
  info: (message: string) => log.debug({ source: 'node-cron' }, message),
  warn: (message: string) => log.warn({ source: 'node-cron' }, message),
  error: (message: string | Error, err?: Error) => log.error({ source: 'node-cron', err: String(err ?? message) }, 'scheduler error'),
  debug: () => undefined,
};

/** setTimeout's limit; a one-shot further away is re-armed in steps. */
const MAX_TIMER_MS = 2_000_000_000;
const MAX_AHEAD_MS = 5 * 366 * 24 * 3600 * 1000;
/** How late a cron run may start and still run (a busy event loop must not skip runs). */
const MISSED_TOLERANCE_MS = 60_000;
const PROMPT_PREVIEW = 80;

function preview(text: string, max = PROMPT_PREVIEW): string {
  return truncate(text.replace(/\s+/g, ' ').trim(), max);
}

function notFound(): ToolError {
  return new ToolError({ code: 'NOT_FOUND', message: 'no task with this id in this group (list_tasks shows them)', retriable: false });
}

export default class Scheduler implements PluginHandler {
  private settings!: Settings;
  private services!: CoreServices;
  private store!: TaskStore;
  private readonly records = new Map<string, TaskRecord>();
  private oneShots: OneShotCounts = {};
  private readonly crons = new Map<string, ScheduledTask>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopping = false;

  async initialize(config: PluginConfig, services: CoreServices): Promise<void> {
    this.services = services;
    this.settings = parseSettings(config);
    this.store = new TaskStore(services.dataDir);
    let saved: TaskRecord[];
    try {
      ({ tasks: saved, oneShots: this.oneShots } = await this.store.load());
    } catch (err) {
      if (err instanceof StateFileError) throw new InitError('CONFIG_ERROR', err.message);
      throw err;
    }
    const now = new Date();
    this.adopt(saved, now);

    const missed: [string, Date][] = [];
    for (const record of this.records.values()) {
      if (record.paused) continue;
      if (record.schedule.type === 'once') {
        // A one-shot that came due while Carapace was down still runs, once, now.
        if (Date.parse(record.schedule.value) <= now.getTime()) missed.push([record.id, new Date(record.schedule.value)]);
        else this.armOnce(record);
        continue;
      }
      const due = this.missedRun(record, now);
      if (due && this.settings.runMissed) missed.push([record.id, due]);
      else if (due) record.since = now.toISOString();
      this.startCron(record);
    }
    try {
      await this.store.save(this.snapshot(), this.oneShots);
    } catch (err) {
      await this.shutdown();
      throw new InitError('INTERNAL_ERROR', `cannot write the task state in the data directory (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    log.info({ tasks: this.records.size, missed: missed.length, timezone: this.settings.timezone }, 'scheduler started');
    // Missed runs go out now, earliest slot first. initialize() has not answered yet, so the
    // core does not list this plugin as healthy: it holds a starting plugin's events and
    // replays them once the init answer is in (and the host's bus publisher holds them
    // until the core has subscribed), so none is lost.
    missed.sort((a, b) => a[1].getTime() - b[1].getTime());
    for (const [id, slot] of missed) this.fire(id, slot);
  }

  async handleRequest(envelope: RequestEnvelope): Promise<unknown> {
    const args = envelope.payload.arguments;
    const group = envelope.group;
    switch (envelope.topic.slice('tool.invoke.'.length)) {
      case 'schedule_task':
        return this.scheduleOnce(group, String(args.prompt), String(args.run_at), envelope.external_content === true);
      case 'schedule_recurring_task':
        return this.scheduleRecurring(group, String(args.prompt), String(args.cron), envelope.external_content === true);
      case 'list_tasks':
        return this.list(group);
      case 'cancel_task':
        return this.cancel(group, String(args.task_id));
      case 'resume_task':
        return this.resume(group, String(args.task_id));
    }
    throw new ToolError({ message: 'unknown tool', retriable: false });
  }

  /** For resume_task's prompt: the task the id names, as this plugin holds it now. */
  async describeCall(tool: string, args: Record<string, unknown>, group: string): Promise<string[]> {
    if (tool !== 'resume_task') return [];
    const record = this.records.get(String(args.task_id));
    if (!record || record.group !== group) return ['No task of this group has this id: nothing would be resumed.'];
    return [
      `The ${record.schedule.type === 'cron' ? `recurring task (cron "${record.schedule.value}", ${this.settings.timezone})` : `one-shot task (at ${record.schedule.value})`}, ${record.paused ? 'paused' : 'active'}${record.last_error ? ` after failing: ${truncate(record.last_error, 300)}` : ''}`,
      `Its prompt: ${truncate(record.prompt, 2000)}`,
    ];
  }

  async handleEvent(envelope: EventEnvelope): Promise<void> {
    if (envelope.topic !== 'agent.completed' && envelope.topic !== 'agent.error') return;
    const taskId = envelope.payload.task_id;
    if (typeof taskId !== 'string') return;
    const record = this.records.get(taskId);
    // Only the task's own group reports on it.
    if (!record || record.group !== envelope.group) return;
    if (envelope.topic === 'agent.completed') {
      if (record.consecutive_failures === 0 && record.last_error === null) return;
      record.consecutive_failures = 0;
      record.last_error = null;
      await this.persist();
      return;
    }
    record.consecutive_failures++;
    record.last_error = failureReason(envelope.payload);
    if (record.paused || record.consecutive_failures < this.settings.maxFailures) {
      await this.persist();
      return;
    }
    this.pause(record);
    await this.persist();
    log.warn({ task: record.id, group: record.group, failures: record.consecutive_failures }, 'task paused after repeated failures');
    const text =
      `Task ${record.id} paused after ${record.consecutive_failures} failures: ${record.last_error}. ` +
      `It was: "${preview(record.prompt)}". Ask me to resume it once the cause is fixed.`;
    await this.services.notifyUser(record.group, text).catch((err: unknown) => log.error({ task: record.id, err: String(err) }, 'could not notify the group'));
  }

  /** The console's Tasks page (panel.ts): what each group has scheduled, and which came after external content. */
  servePanel(req: IncomingMessage, res: ServerResponse): void {
    serveTasksPanel(this.records.values(), this.settings.timezone, req, res);
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    for (const task of this.crons.values()) await task.destroy();
    this.crons.clear();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await this.store?.idle();
  }

  // ---- start-up --------------------------------------------------------------------------

  /** Configured tasks (with their saved run state) and the agent's saved tasks. */
  private adopt(saved: TaskRecord[], now: Date): void {
    const stamp = now.toISOString();
    for (const task of this.settings.configured) {
      const previous = saved.find((r) => r.id === task.id && r.source === 'config' && r.group === task.group);
      this.records.set(task.id, {
        id: task.id,
        group: task.group,
        prompt: task.prompt,
        schedule: { type: 'cron', value: task.cron },
        source: 'config',
        created_at: previous?.created_at ?? stamp,
        since: previous?.since ?? stamp,
        last_run: previous?.last_run ?? null,
        next_run: previous && previous.schedule.value === task.cron ? previous.next_run : null,
        consecutive_failures: previous?.consecutive_failures ?? 0,
        paused: previous?.paused ?? false,
        last_error: previous?.last_error ?? null,
      });
    }
    for (const record of saved) {
      if (record.source !== 'agent') continue;
      if (this.records.has(record.id)) {
        log.warn({ task: record.id }, 'a saved task has the id of a configured one; the saved task is dropped');
        continue;
      }
      const broken =
        record.schedule.type === 'cron' ? cronProblem(record.schedule.value) : Number.isFinite(Date.parse(record.schedule.value)) ? null : 'invalid date-time';
      if (broken) {
        log.error({ task: record.id, problem: broken }, 'a saved task has an invalid schedule; dropped');
        continue;
      }
      this.records.set(record.id, record);
    }
  }

  /** The first scheduled time after the last run (or since tracking began), if it has passed. */
  private missedRun(record: TaskRecord, now: Date): Date | null {
    const from = new Date(record.last_run ?? record.since);
    const due = nextRunAfter(record.schedule.value, this.settings.timezone, from) ?? (record.next_run ? new Date(record.next_run) : null);
    return due && due.getTime() > from.getTime() && due.getTime() <= now.getTime() ? due : null;
  }

  // ---- running ---------------------------------------------------------------------------

  private startCron(record: TaskRecord): void {
    this.crons.get(record.id)?.destroy();
    const task = cron.schedule(record.schedule.value, (context) => this.fire(record.id, context.date ?? new Date()), {
      timezone: this.settings.timezone,
      name: `task:${record.id}`,
      missedExecutionTolerance: MISSED_TOLERANCE_MS,
      logger: cronLogger,
    });
    this.crons.set(record.id, task);
    record.next_run = task.getNextRun()?.toISOString() ?? null;
  }

  private armOnce(record: TaskRecord): void {
    clearTimeout(this.timers.get(record.id));
    const wait = Date.parse(record.schedule.value) - Date.now();
    const timer =
      wait > MAX_TIMER_MS
        ? setTimeout(() => this.armOnce(record), MAX_TIMER_MS)
        : setTimeout(() => this.fire(record.id, new Date(record.schedule.value)), Math.max(0, wait));
    this.timers.set(record.id, timer);
    record.next_run = record.schedule.value;
  }

  private fire(id: string, slot: Date): void {
    const record = this.records.get(id);
    if (!record || record.paused || this.stopping) return;
    record.last_run = slot.toISOString();
    if (record.schedule.type === 'once') {
      this.records.delete(id);
      this.timers.delete(id);
    } else {
      record.next_run = this.crons.get(id)?.getNextRun()?.toISOString() ?? nextRunFromNow(record.schedule.value, this.settings.timezone)?.toISOString() ?? null;
    }
    void this.persist();
    this.announce('task.triggered', record.group, { task_id: record.id, prompt: record.prompt, schedule: { ...record.schedule }, ...(record.external ? { external: true } : {}) });
    log.info({ task: id, group: record.group, schedule: record.schedule.type }, 'task triggered');
  }

  /** Fire and forget: an event the core has not confirmed when the plugin stops is kept by the plugin host for the next run. */
  private announce(topic: string, group: string, payload: JsonObject): void {
    this.services.publish(topic, group, payload).catch((err: unknown) => log.warn({ topic, group, err: String(err) }, 'event not confirmed by the core'));
  }

  private pause(record: TaskRecord): void {
    record.paused = true;
    record.next_run = null;
    this.stop(record.id);
  }

  private stop(id: string): void {
    void this.crons.get(id)?.destroy();
    this.crons.delete(id);
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
  }

  private snapshot(): TaskRecord[] {
    return [...this.records.values()].map((r) => ({ ...r, schedule: { ...r.schedule } }));
  }

  /** Saves; a failure is logged (a run in progress is not undone by it). */
  private async persist(): Promise<void> {
    await this.store.save(this.snapshot(), this.oneShots).catch((err: unknown) => log.error({ err: String(err) }, 'could not save the task state'));
  }

  /** Saves for a tool call: a failure undoes the change and tells the agent. */
  private async commit(undo: () => void): Promise<void> {
    try {
      await this.store.save(this.snapshot(), this.oneShots);
    } catch (err) {
      log.error({ err: String(err) }, 'could not save the task state');
      undo();
      throw new ToolError({ message: 'the task could not be stored on the host; try again later', retriable: true });
    }
  }

  // ---- tools -----------------------------------------------------------------------------

  private newRecord(group: string, prompt: string, schedule: TaskRecord['schedule'], external: boolean): TaskRecord {
    const owned = [...this.records.values()].filter((r) => r.group === group && r.source === 'agent').length;
    if (owned >= this.settings.maxPerGroup) {
      throw new ToolError({ message: `this group already has ${owned} scheduled tasks, the most allowed; cancel some first`, retriable: false });
    }
    let id: string;
    do id = `task-${randomBytes(5).toString('hex')}`;
    while (this.records.has(id));
    const now = new Date().toISOString();
    return { id, group, prompt, schedule, source: 'agent', created_at: now, since: now, last_run: null, next_run: null, consecutive_failures: 0, paused: false, last_error: null, ...(external ? { external: true as const } : {}) };
  }

  private async scheduleOnce(group: string, prompt: string, runAt: string, external: boolean): Promise<unknown> {
    const at = parseRunAt(runAt.trim(), this.settings.timezone);
    if (!at) throw new ToolError({ message: 'run_at is not a valid date-time; use ISO 8601 such as 2026-03-01T08:00:00+01:00', retriable: false });
    const now = Date.now();
    if (at.getTime() <= now) {
      throw new ToolError({ message: `run_at (${at.toISOString()}) is in the past; it is now ${new Date(now).toISOString()}`, retriable: false });
    }
    if (at.getTime() - now > MAX_AHEAD_MS) throw new ToolError({ message: 'run_at is more than 5 years ahead', retriable: false });
    // Counted per UTC day and never given back (a cancelled task still counts): a chain of
    // tasks that each schedule the next cannot outrun it.
    const day = new Date(now).toISOString().slice(0, 10);
    const before = this.oneShots[group];
    const used = before?.day === day ? before.count : 0;
    if (used >= this.settings.maxOneShotPerDay) {
      throw new ToolError({ code: 'DAILY_LIMIT', message: `this group has already created ${used} one-shot tasks today (UTC), the most allowed per day; try again tomorrow`, retriable: false });
    }
    const record = this.newRecord(group, prompt, { type: 'once', value: at.toISOString() }, external);
    record.next_run = record.schedule.value;
    this.records.set(record.id, record);
    this.oneShots[group] = { day, count: used + 1 };
    await this.commit(() => {
      this.records.delete(record.id);
      if (before) this.oneShots[group] = before;
      else delete this.oneShots[group];
    });
    this.armOnce(record);
    this.announce('task.created', group, { task_id: record.id, schedule: { ...record.schedule } });
    log.info({ task: record.id, group, run_at: record.schedule.value }, 'one-shot task scheduled');
    return { task_id: record.id, run_at: record.schedule.value, timezone: this.settings.timezone };
  }

  private async scheduleRecurring(group: string, prompt: string, expression: string, external: boolean): Promise<unknown> {
    const value = expression.trim().replace(/\s+/g, ' ');
    const problem = cronProblem(value);
    if (problem) {
      throw new ToolError({ message: `invalid cron expression (${problem}); use five fields: minute hour day-of-month month day-of-week, e.g. "0 9 * * 1"`, retriable: false });
    }
    const gap = shortestGapSeconds(value, this.settings.timezone);
    if (gap < this.settings.minIntervalS) {
      throw new ToolError({ message: `this schedule runs every ${gap} s; the shortest interval allowed is ${this.settings.minIntervalS} s`, retriable: false });
    }
    // The same recurring task twice would run the same prompt twice at every turn.
    const twin = [...this.records.values()].find((r) => r.group === group && r.schedule.type === 'cron' && r.schedule.value === value && r.prompt === prompt);
    if (twin) {
      throw new ToolError({ code: 'DUPLICATE_TASK', message: `an identical recurring task already exists (task_id ${twin.id}${twin.paused ? ', paused: resume_task resumes it' : ''}); nothing was scheduled`, retriable: false });
    }
    const record = this.newRecord(group, prompt, { type: 'cron', value }, external);
    this.records.set(record.id, record);
    // The cron first: it sets next_run, so the one save carries it.
    this.startCron(record);
    await this.commit(() => {
      this.records.delete(record.id);
      this.stop(record.id);
    });
    this.announce('task.created', group, { task_id: record.id, schedule: { ...record.schedule } });
    log.info({ task: record.id, group, cron: value }, 'recurring task scheduled');
    return { task_id: record.id, cron: value, timezone: this.settings.timezone, next_run: record.next_run };
  }

  private list(group: string): unknown {
    const tasks = listTasks(this.records.values(), group);
    // Prompts a labelled session wrote: the session that reads them is labelled too (the core reads this).
    return { timezone: this.settings.timezone, now: new Date().toISOString(), tasks, ...(tasks.some((t) => t.external) ? { external_content: true } : {}) };
  }

  private async cancel(group: string, id: string): Promise<unknown> {
    const record = this.records.get(id);
    if (!record || record.group !== group) throw notFound();
    if (record.source === 'config') {
      throw new ToolError({ message: 'this task comes from the configuration; only the operator can remove it', retriable: false });
    }
    this.records.delete(id);
    await this.commit(() => this.records.set(id, record));
    this.stop(id);
    log.info({ task: id, group }, 'task cancelled');
    return { cancelled: id };
  }

  private async resume(group: string, id: string): Promise<unknown> {
    const record = this.records.get(id);
    if (!record || record.group !== group) throw notFound();
    if (record.paused) {
      record.paused = false;
      record.consecutive_failures = 0;
      record.since = new Date().toISOString();
      if (record.schedule.type === 'cron') {
        // The cron first: it sets next_run, so the one save carries it.
        const nextRun = record.next_run;
        this.startCron(record);
        await this.commit(() => {
          this.stop(record.id);
          record.paused = true;
          record.next_run = nextRun;
        });
      } else {
        await this.commit(() => {
          record.paused = true;
        });
        this.armOnce(record);
        await this.persist();
      }
      log.info({ task: id, group }, 'task resumed');
    }
    return { task_id: id, status: 'active', next_run: record.next_run };
  }
}

function failureReason(payload: JsonObject): string {
  if (typeof payload.reason === 'string' && payload.reason) return preview(payload.reason, 120);
  if (typeof payload.exit_code === 'number') return `the agent exited with code ${payload.exit_code}`;
  return 'the agent run failed';
}
