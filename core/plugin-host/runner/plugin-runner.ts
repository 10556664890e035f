// One plugin, in its own process: loads its handler, runs its lifecycle, answers the
// supervisor's requests, hooks and events, and turns its core service calls into
// messages. Everything the handler can reach of Carapace goes through `send`.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { HandlerOutcome, ServiceMethod } from '../../src/plugins/host-protocol.js';
import type { EventEnvelope, JsonObject, RequestEnvelope } from '../../src/protocol/envelope.js';
import { AbortedBeforeActing, errors, ServiceError, ToolError, type CheckConnections, type CoreServices, type PluginHandler, type PublishOutcome, type RequestContext } from '../../sdk/index.js';
import type { HookMessage, RunnerToSupervisor, StartMessage, StopOutcome, SupervisorToRunner } from '../child-protocol.js';
import { categorize, loadConnectionChecks, loadHandler, TimeoutError } from '../load-handler.js';
import { runConnectionChecks } from './connection-checks.js';
import { servePanel } from '../panel-server.js';

/** What a service call runs under: the request (or describe_call hook) and its group. */
interface Scope {
  rid: string | null;
  group: string | null;
}

/**
 * A request in hand. Its AbortController is made when the handler first reads its signal:
 * an AbortSignal costs about 4 µs to make (an EventTarget), more than the rest of a small
 * request here, and most handlers never look at it.
 */
interface InHand {
  cancelled: boolean;
  controller: AbortController | null;
  /** Service calls made under it and not answered yet: its answer waits for them. */
  calls: Set<Promise<unknown>> | null;
}

const SERVICE_TIMEOUT_MS = 5000;

/** Plain JSON data only: what the core can forward unchanged. */
export function isJsonData(value: unknown, seen = new Set<object>()): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object') return false;
  if (seen.has(value)) return false;
  seen.add(value);
  const proto = Object.getPrototypeOf(value) as unknown;
  const ok = Array.isArray(value)
    ? value.every((v) => isJsonData(v, seen))
    : (proto === Object.prototype || proto === null) && Object.values(value).every((v) => v === undefined || isJsonData(v, seen));
  seen.delete(value);
  return ok;
}

export class PluginRunner {
  private handler: PluginHandler | null = null;
  /** What a connection check runs on: the handler module's export, the settings and the way out this process has. */
  private check: { start: StartMessage; run: CheckConnections | null } | null = null;
  private readonly scope = new AsyncLocalStorage<Scope>();
  private readonly calls = new Map<string, (r: Extract<SupervisorToRunner, { t: 'service_result' }>) => void>();
  private readonly inHand = new Map<string, InHand>();
  private panel: Server | null = null;
  private stopping = false;
  /** Events and requests being handled now (a request on its lane is one the host cannot drain). */
  private readonly events = new Set<Promise<void>>();
  private readonly requests = new Set<Promise<void>>();
  private published = 0;
  /** Publishes the core has not confirmed yet, by id. */
  private readonly publishing = new Map<number, { resolve: (outcome: PublishOutcome) => void; reject: (err: ServiceError) => void }>();

  constructor(private readonly send: (message: RunnerToSupervisor) => void) {}

  receive(message: SupervisorToRunner): void {
    switch (message.t) {
      case 'start':
        void this.start(message);
        break;
      case 'request': {
        const handling = this.handleRequest(message.rid, message.envelope);
        this.requests.add(handling);
        void handling.finally(() => this.requests.delete(handling));
        break;
      }
      case 'cancel':
        this.cancel(message.rid);
        break;
      case 'hook':
        void this.handleHook(message);
        break;
      case 'event':
        void this.handleEvent(message.envelope);
        break;
      case 'service_result':
        this.calls.get(message.sid)?.(message);
        break;
      case 'ping':
        this.send({ t: 'pong', n: message.n });
        break;
      case 'published':
        if (message.refused === undefined) this.publishing.get(message.id)?.resolve(message.held === undefined ? {} : { held: message.held });
        else this.publishing.get(message.id)?.reject(new ServiceError('INVALID_INPUT', `publish: ${message.refused}`));
        this.publishing.delete(message.id);
        break;
      case 'shutdown':
        void this.shutdown(message.shutdown_ms).then((r) => this.send({ t: 'stopped', ...r }));
        break;
    }
  }

  private async start(message: StartMessage): Promise<void> {
    try {
      mkdirSync(message.dataDir, { recursive: true });
      this.check = { start: message, run: await loadConnectionChecks(message.handlerFile) };
      // A process for a connection check alone: the plugin did not start, and is not started here.
      if (message.mode === 'check') {
        this.send({ t: 'init', ok: true });
        return;
      }
      const handler = await loadHandler(message.handlerFile);
      await withTimeout(
        this.scope.run({ rid: null, group: null }, () => handler.initialize(message.config, this.services(message))),
        message.initTimeoutMs,
        'initialize()',
      );
      if (message.panelSocket && handler.servePanel) {
        this.panel = await servePanel(message.panelSocket, message.plugin, (req, res) => this.scope.run({ rid: null, group: null }, () => handler.servePanel!(req, res)));
      }
      this.handler = handler;
      this.send({ t: 'init', ok: true });
    } catch (err) {
      this.send({ t: 'init', ok: false, category: categorize(err), detail: String((err as Error)?.stack ?? err) });
    }
  }

  private services(start: StartMessage): CoreServices {
    const call = (method: ServiceMethod, args: JsonObject, group: string | null = this.scope.getStore()?.group ?? null) =>
      this.callCore(this.scope.getStore()?.rid ?? null, group, method, args);
    return {
      dataDir: start.dataDir,
      errors,
      ...(start.egressProxy ? { egressProxy: start.egressProxy } : {}),
      getAuditLog: (filters = {}) => call('getAuditLog', { ...filters }) as Promise<never>,
      getToolCatalog: () => call('getToolCatalog', {}) as Promise<never>,
      getSessionInfo: () => call('getSessionInfo', {}) as Promise<never>,
      listConfirmations: (group) => call('listConfirmations', {}, group) as Promise<never>,
      confirmationStatus: (id) => call('confirmationStatus', { id }, null) as Promise<never>,
      notifyUser: (group, text) => call('notifyUser', { text }, group) as Promise<boolean>,
      reportFault: (message, group) => call('reportFault', { message }, group ?? null).then(() => undefined),
      readFile: (file) => call('readFile', { id: file.id }).then((v) => Buffer.from(String((v as { base64?: unknown }).base64 ?? ''), 'base64')),
      resolveConfirmation: (id, approve, by, group, allowHours, hash) =>
        call('resolveConfirmation', { id, approve, by, ...(allowHours === undefined ? {} : { allow_hours: allowHours }), ...(hash === undefined ? {} : { hash }) }, group) as Promise<boolean | 'stale'>,
      requestPairing: (chat, details) => call('requestPairing', { chat, ...details }, null) as Promise<never>,
      // Answered when the core has it; a host that died first never answers, and this
      // process ends with it before the plugin can save progress past a lost event.
      publish: (topic, group, payload, options) =>
        new Promise<PublishOutcome>((resolve, reject) => {
          const id = ++this.published;
          this.publishing.set(id, { resolve, reject });
          if (this.stopping) this.unconfirmed(); // sent for the host to keep, not waited for
          this.send({ t: 'publish', id, topic, group, payload, ...(options?.key === undefined ? {} : { key: options.key }) });
        }),
    };
  }

  /** A core service, through the supervisor (which names the plugin). */
  callCore(rid: string | null, group: string | null, method: ServiceMethod, args: JsonObject): Promise<unknown> {
    const sid = randomUUID();
    const answer = new Promise((resolve, reject) => {
      const timer = setTimeout(() => done({ t: 'service_result', sid, ok: false, message: 'core did not answer' }), SERVICE_TIMEOUT_MS);
      const done = (r: Extract<SupervisorToRunner, { t: 'service_result' }>): void => {
        if (!this.calls.delete(sid)) return;
        clearTimeout(timer);
        if (r.ok) resolve(r.value);
        else reject(new ServiceError(r.code ?? 'SERVICE_FAILED', `${method}: ${r.message ?? 'failed'}`));
      };
      this.calls.set(sid, done);
      this.send({ t: 'service', sid, rid, group, method, args });
    });
    // A call made under a request is part of it, awaited by the handler or not (a note of
    // what it sent): the request's answer waits for it, so that the core still has the
    // request in hand when the call comes (on the lane, the answer would overtake it).
    const request = rid === null ? undefined : this.inHand.get(rid);
    if (request) {
      const calls = (request.calls ??= new Set());
      calls.add(answer);
      void answer.finally(() => calls.delete(answer)).catch(() => undefined);
    }
    return answer;
  }

  private async handleRequest(rid: string, envelope: RequestEnvelope): Promise<void> {
    const handler = this.handler;
    if (!handler || this.stopping) {
      this.send({ t: 'response', rid, outcome: { kind: 'unavailable' } });
      return;
    }
    const request: InHand = { cancelled: false, controller: null, calls: null };
    this.inHand.set(rid, request);
    const context: RequestContext = {
      get signal(): AbortSignal {
        if (!request.controller) {
          request.controller = new AbortController();
          if (request.cancelled) request.controller.abort();
        }
        return request.controller.signal;
      },
    };
    let outcome: HandlerOutcome;
    try {
      const result = await this.scope.run({ rid, group: envelope.group }, () => handler.handleRequest(envelope, context));
      outcome = isJsonData(result) ? { kind: 'result', result } : { kind: 'crash', detail: 'handler returned a value that is not plain JSON data' };
    } catch (err) {
      // instanceof against the one SDK module: a look-alike error is treated as a crash.
      if (err instanceof AbortedBeforeActing) outcome = request.cancelled ? { kind: 'stopped' } : { kind: 'crash', detail: 'AbortedBeforeActing thrown although the request was not aborted' };
      else if (err instanceof ToolError) outcome = { kind: 'tool_error', code: err.code, message: String(err.message), retriable: err.retriable === true };
      else outcome = { kind: 'crash', detail: String((err as Error)?.stack ?? err) };
    }
    if (request.calls) await Promise.allSettled([...request.calls]);
    this.inHand.delete(rid);
    this.send({ t: 'response', rid, outcome });
  }

  /** The request's deadline passed: its signal is aborted (now, or as soon as it is made). */
  private cancel(rid: string): void {
    const request = this.inHand.get(rid);
    if (!request) return;
    request.cancelled = true;
    request.controller?.abort();
  }

  private async handleHook(message: HookMessage): Promise<void> {
    const handler = this.handler;
    if (message.hook === 'connection_check') {
      this.send({ t: 'hook_result', hid: message.hid, ...(await runConnectionChecks(this.check)) });
      return;
    }
    try {
      // A description is asked for one call: its services are scoped to it like a request's.
      const scope = { rid: message.hook === 'describe_call' ? message.hid : null, group: message.group };
      let value: unknown;
      if (message.hook === 'describe_call') {
        if (typeof handler?.describeCall !== 'function') throw new Error('plugin does not provide describeCall');
        value = await this.scope.run(scope, () => handler.describeCall!(message.tool, message.arguments, message.group));
      } else {
        if (typeof handler?.getBrief !== 'function') throw new Error('plugin does not provide getBrief');
        value = await this.scope.run(scope, () => handler.getBrief!(message.group));
      }
      this.send({ t: 'hook_result', hid: message.hid, ok: true, value: isJsonData(value) ? value : null });
    } catch (err) {
      this.send({ t: 'hook_result', hid: message.hid, ok: false, detail: String((err as Error)?.message ?? err) });
    }
  }

  private async handleEvent(envelope: EventEnvelope): Promise<void> {
    const handler = this.handler;
    if (!handler || this.stopping || typeof handler.handleEvent !== 'function') return;
    const handling = this.scope.run({ rid: null, group: envelope.group }, () => handler.handleEvent!(envelope));
    this.events.add(handling);
    try {
      await handling;
    } catch (err) {
      process.stderr.write(`${JSON.stringify({ level: 50, msg: 'handleEvent failed', topic: envelope.topic, err: String((err as Error)?.message ?? err) })}\n`);
    } finally {
      this.events.delete(handling);
    }
  }

  /**
   * A stopping plugin waits for no receipt (a stopping core gives none): what the core has
   * not confirmed stays with the host, kept for the next run, and the plugin must not save
   * its progress past it.
   */
  private unconfirmed(): void {
    for (const { reject } of this.publishing.values()) reject(new ServiceError('UNAVAILABLE', 'publish: the plugin is stopping and the core has not confirmed the event; the plugin host keeps it for the next run'));
    this.publishing.clear();
  }

  /**
   * The handler's shutdown(), bounded; first the events it is still handling (a stopping
   * core's last words, such as a withdrawn prompt's edit). Requests in flight were drained
   * by the supervisor.
   */
  private async shutdown(ms: number): Promise<StopOutcome> {
    this.stopping = true;
    this.panel?.close();
    this.unconfirmed();
    try {
      const events = Promise.allSettled([...this.events, ...this.requests]);
      await withTimeout(events.then(() => this.handler?.shutdown?.()), ms, 'shutdown()');
      return { outcome: 'clean' };
    } catch (err) {
      return { outcome: err instanceof TimeoutError ? 'timeout' : 'error', detail: String((err as Error)?.message ?? err) };
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
