// The plugin host's side of one plugin's process: starts it (as the plugin's own uid when
// the host is root), passes messages both ways, answers for it when it dies holding a
// request, and starts it again with back-off. A plugin that keeps dying, or stops
// answering its heartbeat (a busy loop), is killed; one that dies too often is failed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HandlerOutcome } from '../src/plugins/host-protocol.js';
import type { EventEnvelope, RequestEnvelope } from '../src/protocol/envelope.js';
import type { InitFailureCategory } from '../src/protocol/errors.js';
import type { HookMessage, RunnerToSupervisor, StartMessage, StopOutcome, SupervisorToRunner } from './child-protocol.js';
import { InProcessChild } from './in-process-child.js';
import { endEverythingOf } from './isolation.js';
import { MESSAGES_PER_SECOND, RunnerChannel } from './runner-channel.js';
import { MAX_QUEUED_EVENTS, StartQueue } from './start-queue.js';

const RUNNER_MAIN = join(dirname(fileURLToPath(import.meta.url)), 'runner/main.js');

/** Crashes counted over this window decide the back-off and when to give up. */
const CRASH_WINDOW_MS = 10 * 60_000;
const MAX_CRASHES = 5;
const MAX_BACKOFF_MS = 30_000;
const HEARTBEAT_MS = 5000;
/** No answer to the heartbeat for this long: the process is stuck (a busy loop) and is killed. */
const STUCK_AFTER_MS = 15_000;
/** Each plugin's JavaScript heap: one plugin's leak ends its own process, not the machine's memory. */
const HEAP_MB = 384;
/**
 * All its memory (heap, Buffers, native), as RLIMIT_DATA: the heap's bound alone lets a
 * plugin take the machine's memory outside V8 (Buffer.alloc). Past it an allocation fails
 * in the plugin's own process, and nothing else's.
 */
export const DATA_LIMIT_MB = 1024;
/** util-linux's prlimit (in the image, and on every Debian): without it, only the heap is bounded, and the host says so once. */
const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path)) ?? null;
if (!PRLIMIT) process.stderr.write(`${JSON.stringify({ level: 40, service: 'plugin-host', msg: 'prlimit (util-linux) not found: each plugin\'s memory is bounded only by its heap limit' })}\n`);
/** A throttled plugin is reported (the audit log) at most once in this long. */
const THROTTLE_REPORT_MS = 60_000;

export type InitResult = { ok: true } | { ok: false; category: InitFailureCategory; detail: string };

export interface PluginProcessEvents {
  init(result: InitResult): void;
  /** Its process ended while it was running; `restartInMs` null: it will not be started again. */
  down(detail: string, restartInMs: number | null): void;
  response(rid: string, outcome: HandlerOutcome): void;
  hookResult(message: Extract<RunnerToSupervisor, { t: 'hook_result' }>): void;
  /** It broke the channel's rules or floods it: for the audit log (reportFault on its behalf). */
  fault(detail: string): void;
  /** A service call, with the request id the process says it runs under (the core checks it). */
  service(message: Extract<RunnerToSupervisor, { t: 'service' }>): void;
  /** `answer` reaches the process that published (not one started after it, whose ids start again). */
  publish(message: Extract<RunnerToSupervisor, { t: 'publish' }>, answer: (refused?: string, held?: string) => void): void;
}

export interface PluginProcessOptions {
  /** Replaced only by useConfig. */
  start: Omit<StartMessage, 't'>;
  /** The plugin's own uid and gid (the host runs as root), or null: the host's own. */
  ids: { uid: number; gid: number } | null;
  env: NodeJS.ProcessEnv;
  events: PluginProcessEvents;
  /** The benchmark's baseline only: the plugin inside the host's process (in-process-child.ts). */
  inProcess?: boolean;
  /** Where its process gets a request lane to the core, and the token that vouches for it (the core's request-lanes.ts); none: every request through the host. */
  lane?: () => { path: string; token: string } | null;
}

type State = 'starting' | 'ready' | 'waiting' | 'failed' | 'stopped';

/** A lane to the core for one plugin's process, vouched for by the host's hello; null where the core has none. */
function connectLane(lane: { path: string; token: string }, plugin: string): Promise<Socket | null> {
  return new Promise((resolve) => {
    const socket = connect(lane.path);
    socket.once('error', () => resolve(null));
    socket.once('connect', () => socket.write(`${JSON.stringify({ t: 'lane', plugin, token: lane.token })}\n`, (err) => resolve(err ? null : socket)));
  });
}

/** Its end of the channel: a socket pair (runner-channel.ts), or the benchmark's in-process runner. */
interface Link {
  send(message: SupervisorToRunner): boolean;
  close(): void;
}

export class PluginProcess {
  private child: ChildProcess | null = null;
  private link: Link | null = null;
  /** Why the host ended its process, when it did (said in plugin_down rather than "killed by SIGKILL"). */
  private killedFor: string | null = null;
  private throttleReportedAt = 0;
  private state: State = 'starting';
  /** Requests (through the host) and hooks with this process: answered for it if it dies. */
  private readonly requests = new Set<string>();
  private readonly hooks = new Set<string>();
  private crashes: number[] = [];
  private heartbeat: NodeJS.Timeout | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  private lastPong = 0;
  /** The latest two pings' numbers (random: a plugin cannot answer one it did not read). */
  private pinged = -1;
  private pingedBefore = -1;
  private stopped: ((outcome: StopOutcome) => void) | null = null;

  /** Events that came while it was not ready yet (start-queue.ts). */
  private readonly queued = new StartQueue();

  /** Its bus subscriptions ("<plugin> <prefix>"), ended with it when it starts again on new settings. */
  subscriptions: string[] = [];

  constructor(private readonly options: PluginProcessOptions) {}

  /** Settings for its next start (after a crash): the plugin applied the change itself meanwhile. */
  useConfig(config: StartMessage['config']): void {
    this.options.start = { ...this.options.start, config };
  }

  get name(): string {
    return this.options.start.plugin;
  }

  get ready(): boolean {
    return this.state === 'ready';
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** It will not run again (it failed to start, gave up, or was stopped). */
  get retired(): boolean {
    return this.state === 'failed' || this.state === 'stopped';
  }

  /** Retired, and its process has ended: another of its uid may run without meeting it. */
  get gone(): boolean {
    return this.retired && this.child === null;
  }

  /** What it was started with: a connection check's own process runs on the same (check-process.ts). */
  get launch(): Pick<PluginProcessOptions, 'start' | 'ids' | 'env'> {
    return { start: { ...this.options.start }, ids: this.options.ids, env: this.options.env };
  }

  start(): void {
    this.state = 'starting';
    this.killedFor = null;
    const lane = this.options.inProcess ? null : (this.options.lane?.() ?? null);
    if (!lane) return this.spawn(null);
    void connectLane(lane, this.name).then((socket) => {
      // Stopped (or started again) while the lane was being connected.
      if (this.state !== 'starting' || this.child) return void socket?.destroy();
      this.spawn(socket);
    });
  }

  /** Its process, with its channel on fd 3 and, when it has one, its request lane on fd 4 (the host keeps no copy). */
  private spawn(lane: Socket | null): void {
    const { ids, env } = this.options;
    let child: ChildProcess;
    if (this.options.inProcess) {
      const inProcess = new InProcessChild();
      inProcess.on('message', (message: RunnerToSupervisor) => this.receive(message));
      child = inProcess as unknown as ChildProcess;
      this.link = inProcess;
    } else {
      // fd 3 is a socket pair the host reads itself (runner-channel.ts), not Node's IPC
      // channel, whose parser a plugin could end the host with. Its own process group, and
      // its memory bounded as a whole (prlimit, util-linux), not only its heap.
      const node = [process.execPath, `--max-old-space-size=${HEAP_MB}`, RUNNER_MAIN];
      const [command, ...args] = PRLIMIT ? [PRLIMIT, `--data=${DATA_LIMIT_MB * 1024 * 1024}`, '--', ...node] : node;
      child = spawn(command, args, {
        stdio: ['ignore', 'inherit', 'inherit', 'pipe', ...(lane ? [lane] : [])],
        env,
        cwd: '/',
        detached: true,
        ...(ids ? { uid: ids.uid, gid: ids.gid } : {}),
      });
      const channel = new RunnerChannel(child.stdio[3] as Socket, {
        message: (message) => this.receive(message),
        fault: (fault) => this.kill(child, `${fault.code}: ${fault.detail}`),
        throttled: (pausedMs) => this.throttled(pausedMs),
      });
      this.link = channel;
      lane?.destroy();
    }
    this.child = child;
    child.on('error', (err) => this.ended(child, `could not be started: ${err.message}`));
    child.on('exit', (code, signal) => this.ended(child, signal ? `killed by ${signal}` : `exited with code ${code}`));
    this.lastPong = Date.now();
    this.heartbeat = setInterval(() => this.beat(child), HEARTBEAT_MS);
    this.heartbeat.unref();
    this.send({ t: 'start', ...this.options.start });
  }

  /** The host ends a process that broke the rules, and says why when it is down. */
  private kill(child: ChildProcess, why: string): void {
    if (this.child !== child) return;
    this.killedFor ??= why;
    process.stderr.write(`${JSON.stringify({ level: 50, service: 'plugin-host', plugin: this.name, msg: `killed: ${why}` })}\n`);
    this.options.events.fault(`plugin "${this.name}" was killed: ${why}`);
    child.kill('SIGKILL');
  }

  private throttled(pausedMs: number): void {
    const now = Date.now();
    if (now - this.throttleReportedAt < THROTTLE_REPORT_MS) return;
    this.throttleReportedAt = now;
    this.options.events.fault(`plugin "${this.name}" sends more than ${MESSAGES_PER_SECOND} messages a second: throttled (reading paused ${pausedMs} ms)`);
  }

  request(rid: string, envelope: RequestEnvelope): boolean {
    if (this.state !== 'ready') return false;
    this.requests.add(rid);
    this.send({ t: 'request', rid, envelope });
    return true;
  }

  cancel(rid: string): void {
    if (this.requests.has(rid)) this.send({ t: 'cancel', rid });
  }

  hook(message: HookMessage): boolean {
    if (this.state !== 'ready') return false;
    this.hooks.add(message.hid);
    this.send(message);
    return true;
  }

  event(envelope: EventEnvelope): void {
    if (this.state === 'ready') this.send({ t: 'event', envelope });
    else if (this.state === 'starting' || this.state === 'waiting') this.queued.add(envelope);
  }

  answer(message: Extract<SupervisorToRunner, { t: 'service_result' }>): void {
    this.send(message);
  }

  /** Requests still with the handler (what a stopping host drains). */
  get busy(): number {
    return this.requests.size;
  }

  /** The handler's shutdown(), bounded; then the process ends. */
  async stop(shutdownMs: number): Promise<StopOutcome | null> {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const child = this.child;
    const wasReady = this.state === 'ready';
    this.state = 'stopped';
    if (!child || child.exitCode !== null || child.signalCode !== null) return null;
    let outcome: StopOutcome | null = null;
    if (wasReady) {
      outcome = await new Promise<StopOutcome>((resolve) => {
        const timer = setTimeout(() => resolve({ outcome: 'timeout', detail: `shutdown() did not finish within ${shutdownMs} ms` }), shutdownMs + 1000);
        this.stopped = (o) => {
          clearTimeout(timer);
          resolve(o);
        };
        this.send({ t: 'shutdown', shutdown_ms: shutdownMs });
      });
    }
    child.kill('SIGKILL');
    await this.sweep(child);
    return outcome;
  }

  /** Nothing of the plugin's may outlive its process: every process of its uid (or its group). */
  private sweep(child: ChildProcess): Promise<void> {
    if (this.options.inProcess) return Promise.resolve();
    return endEverythingOf(this.options.ids, child.pid);
  }

  private send(message: SupervisorToRunner): void {
    // A closed channel: the exit handler answers for what was in flight.
    this.link?.send(message);
  }

  /** True when the message answers something this host asked of it. */
  private receive(message: RunnerToSupervisor): boolean {
    switch (message.t) {
      case 'init':
        if (this.state !== 'starting') return false;
        if (message.ok) {
          this.state = 'ready';
          this.options.events.init({ ok: true });
          const { envelopes, dropped } = this.queued.take();
          for (const envelope of envelopes) this.send({ t: 'event', envelope });
          if (dropped > 0) this.options.events.fault(`${dropped} events for it came while it was starting and were dropped (at most ${MAX_QUEUED_EVENTS} are kept)`);
        } else {
          // A plugin that cannot start (not configured, bad credentials) is not retried.
          this.state = 'failed';
          this.queued.take();
          this.options.events.init({ ok: false, category: message.category, detail: message.detail });
          this.child?.kill('SIGKILL');
        }
        return true;
      case 'response':
        if (!this.requests.delete(message.rid)) return false;
        this.options.events.response(message.rid, message.outcome);
        return true;
      case 'hook_result':
        if (!this.hooks.delete(message.hid)) return false;
        this.options.events.hookResult(message);
        return true;
      case 'service': {
        // The id of a request it holds, here or on its lane (which the host does not see): the
        // core takes a call's request only while it is in flight and the caller's own.
        this.options.events.service(message);
        return false;
      }
      case 'publish': {
        const link = this.link;
        this.options.events.publish(message, (refused, held) => {
          if (this.link === link) link?.send({ t: 'published', id: message.id, ...(refused === undefined ? {} : { refused }), ...(held === undefined ? {} : { held }) });
        });
        return false;
      }
      case 'pong':
        // Only an answer to a ping it read counts: a plugin that reads nothing cannot keep itself alive.
        if (message.n !== this.pinged && message.n !== this.pingedBefore) return false;
        this.lastPong = Date.now();
        return true;
      case 'stopped':
        if (!this.stopped) return false;
        this.stopped({ outcome: message.outcome, ...(message.detail === undefined ? {} : { detail: message.detail }) });
        return true;
    }
  }

  private beat(child: ChildProcess): void {
    if (Date.now() - this.lastPong > STUCK_AFTER_MS) {
      process.stderr.write(`${JSON.stringify({ level: 50, service: 'plugin-host', plugin: this.name, msg: `no heartbeat for ${STUCK_AFTER_MS} ms: killed` })}\n`);
      child.kill('SIGKILL');
      return;
    }
    this.pingedBefore = this.pinged;
    this.pinged = randomInt(2 ** 31);
    this.send({ t: 'ping', n: this.pinged });
  }

  private ended(child: ChildProcess, exitDetail: string): void {
    if (this.child !== child) return;
    const detail = this.killedFor ? `${this.killedFor}; ${exitDetail}` : exitDetail;
    this.child = null;
    this.link?.close();
    this.link = null;
    const swept = this.sweep(child);
    if (this.heartbeat) clearInterval(this.heartbeat);
    // It may have acted on these before it died: only "unknown" is true.
    for (const rid of this.requests) this.options.events.response(rid, { kind: 'lost' });
    for (const hid of this.hooks) this.options.events.hookResult({ t: 'hook_result', hid, ok: false, detail: `the plugin's process ended (${detail})` });
    this.requests.clear();
    this.hooks.clear();
    this.stopped?.({ outcome: 'error', detail: `its process ended (${detail})` });
    if (this.state === 'stopped' || this.state === 'failed') return;
    const wasStarting = this.state === 'starting';
    const now = Date.now();
    this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    if (this.crashes.length > MAX_CRASHES) {
      this.state = 'failed';
      this.queued.take();
      const why = `its process ended ${this.crashes.length} times in ${CRASH_WINDOW_MS / 60_000} minutes (last: ${detail}); not started again until the plugin host restarts`;
      if (wasStarting) this.options.events.init({ ok: false, category: 'INTERNAL_ERROR', detail: why });
      else this.options.events.down(why, null);
      return;
    }
    const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (this.crashes.length - 1));
    this.state = 'waiting';
    if (!wasStarting) this.options.events.down(detail, delay);
    this.restartTimer = setTimeout(() => void swept.then(() => this.state === 'waiting' && this.start()), delay);
    this.restartTimer.unref();
  }
}
