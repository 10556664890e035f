// One warm sandbox per session and kind (run_program's, and one per skill the session
// runs: its plan): created and started by the first run, reused by later runs (each a
// `docker exec`), removed when the session ends (agent teardown, quarantine, the core
// stopping) or after `idle_minutes` without a run. One run at a time per sandbox: a second
// one while a run holds it is refused (RUN_BUSY), not queued. What a plan prepares for its
// sandbox (a skill's relay) is undone when the sandbox goes.
import type Docker from 'dockerode';
import { ToolFailure, type ErrorPayload } from '../protocol/errors.js';
import { sandboxCreateOptions, type SandboxExtra, type SandboxSpec } from './container-spec.js';

export interface WarmSandboxesDeps {
  docker: Docker;
  image: string;
  instance: string;
  limits: SandboxSpec['limits'];
  idleMs: number;
  /** The OCI runtime sandboxes get, or why none can be had. */
  runtime(): Promise<'runsc' | 'runc' | ToolFailure>;
  /** The group's workspace, as the agent has it (its volume or host folder). */
  workspace(group: string): Promise<SandboxSpec['workspace']>;
  /**
   * Kills whatever a run left in a sandbox (run-exec.ts `sweep`); false if that could not be
   * made sure of. Done SWEEP_AFTER_MS after each run unless another run starts first (whose
   * own wrapper begins with the same), so nothing of a run outlives it by much.
   */
  sweep(id: string): Promise<boolean>;
  /** Said to the audit log: a sandbox removed for what a run left in it. */
  report(session: string, group: string, reason: string): void;
}

const SWEEP_AFTER_MS = 1000;

/** Which sandbox of a session a run needs, and how it is made. */
export interface SandboxPlan {
  /** Among the session's sandboxes: '' for run_program's, 'skill:<name>' for a skill's. */
  key: string;
  /** In the container's name: "run", "skill-fetch". */
  label: string;
  image: string;
  /** Made just before the container and undone when it goes (a skill's relay socket). */
  prepare?(): Promise<{ extra: SandboxExtra; close(): void }>;
}

/** A session's sandbox, held for one run. */
export interface Lease {
  id: string;
  /** Created for this run (false: a warm one reused). */
  cold: boolean;
  runtime: 'runsc' | 'runc';
  /** The run is over: `keep` the sandbox warm, or remove it (it stopped, or a run outlived its limit in it). */
  release(keep: boolean): void;
}

interface Warm {
  session: string;
  group: string;
  /** Undoes what the plan prepared; called once the container is gone. */
  close: (() => void) | null;
  id: string | null;
  runtime: 'runsc' | 'runc' | null;
  busy: boolean;
  idle: NodeJS.Timeout | null;
  /** The session ended while the sandbox was being made: it is removed once made. */
  ended: boolean;
  /** The sweep after the last run, pending; the next run starts after it. */
  sweep: NodeJS.Timeout | null;
  settling: Promise<void> | null;
}

export function sandboxError(code: 'SANDBOX_UNAVAILABLE' | 'RUN_BUSY', message: string, retriable: boolean, extra: Partial<ErrorPayload> = {}, detail?: string): ToolFailure {
  return new ToolFailure({ code, message, retriable, stage: 6, ...extra }, detail);
}

export class WarmSandboxes {
  private readonly warm = new Map<string, Warm>();
  private stopped = false;

  constructor(private readonly deps: WarmSandboxesDeps) {}

  /** run_program's plan: the sandbox image, nothing more. */
  get programPlan(): SandboxPlan {
    return { key: '', label: 'run', image: this.deps.image };
  }

  /** The session's sandbox of `plan` for one run: the warm one, or a new one. */
  async lease(session: string, group: string, plan: SandboxPlan = this.programPlan): Promise<Lease | ToolFailure> {
    if (this.stopped) return sandboxError('SANDBOX_UNAVAILABLE', 'the core is stopping: no program can run now', true);
    const key = `${session}\n${plan.key}`;
    let warm = this.warm.get(key);
    if (warm?.busy) return sandboxError('RUN_BUSY', 'another run of this session is still going in this sandbox: one run at a time (wait for its answer, then try again)', true, { retry_after: 1 });
    if (!warm) {
      warm = { session, group, close: null, id: null, runtime: null, busy: true, idle: null, ended: false, sweep: null, settling: null };
      this.warm.set(key, warm);
    }
    warm.busy = true;
    if (warm.idle) clearTimeout(warm.idle);
    if (warm.sweep) clearTimeout(warm.sweep);
    warm.idle = warm.sweep = null;
    const held = warm;
    // A sweep already going: this run starts after it (and finds a new sandbox if it failed).
    if (held.settling) await held.settling;
    if (held.ended) return sandboxError('SANDBOX_UNAVAILABLE', 'the session ended', false);
    let cold = false;
    if (held.id === null) {
      const made = await this.create(held, plan).catch((err: unknown) => sandboxError('SANDBOX_UNAVAILABLE', 'the sandbox could not be started; try again', true, {}, String((err as Error)?.message ?? err)));
      if (made instanceof ToolFailure) {
        if (this.warm.get(key) === held) this.warm.delete(key);
        return made;
      }
      if (held.ended || this.stopped) {
        await this.remove(held, made.id);
        return sandboxError('SANDBOX_UNAVAILABLE', 'the session ended', false);
      }
      held.id = made.id;
      held.runtime = made.runtime;
      cold = true;
    }
    let released = false;
    return {
      id: held.id,
      cold,
      runtime: held.runtime!,
      release: (keep) => {
        if (released) return;
        released = true;
        this.release(key, held, keep);
      },
    };
  }

  /** The session ended: its sandboxes go (a run still going in one ends with it). */
  async end(session: string): Promise<void> {
    const ending = [...this.warm].filter(([, warm]) => warm.session === session);
    await Promise.all(ending.map(async ([key, warm]) => {
      warm.ended = true;
      this.warm.delete(key);
      if (warm.idle) clearTimeout(warm.idle);
      if (warm.sweep) clearTimeout(warm.sweep);
      if (warm.id) await this.remove(warm, warm.id);
    }));
  }

  /** The core stops: every sandbox goes. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...new Set([...this.warm.values()].map((w) => w.session))].map((session) => this.end(session)));
  }

  /** The session's sandbox container of plan `key` now, if it has one (tests, the benchmark). */
  containerOf(session: string, key = ''): string | null {
    return this.warm.get(`${session}\n${key}`)?.id ?? null;
  }

  /** Resolves once the sweep after the sandbox's last run is over (tests: their own execs beside the core's). */
  async swept(session: string, key = ''): Promise<void> {
    const warm = this.warm.get(`${session}\n${key}`);
    while (warm && (warm.sweep || warm.settling)) await (warm.settling ?? new Promise((resolve) => setTimeout(resolve, 50)));
  }

  private release(key: string, warm: Warm, keep: boolean): void {
    warm.busy = false;
    if (this.warm.get(key) !== warm) return; // the session ended meanwhile: removed already
    if (!keep || this.stopped) {
      const id = warm.id;
      warm.id = null;
      if (id) void this.remove(warm, id);
      this.warm.delete(key);
      return;
    }
    warm.idle = setTimeout(() => {
      if (this.warm.get(key) !== warm || warm.busy) return;
      this.warm.delete(key);
      if (warm.id) void this.remove(warm, warm.id);
    }, this.deps.idleMs);
    warm.idle.unref();
    warm.sweep = setTimeout(() => {
      warm.sweep = null;
      const id = warm.id;
      if (this.warm.get(key) !== warm || warm.busy || !id) return;
      warm.settling = this.deps.sweep(id).then(async (clean) => {
        warm.settling = null;
        if (clean || warm.id !== id) return;
        // Something of the run would not die: the sandbox goes, the next run gets a new one.
        warm.id = null;
        this.deps.report(warm.session, warm.group, 'what a run left running in its sandbox could not be killed: the sandbox was removed');
        await this.remove(warm, id);
      });
    }, SWEEP_AFTER_MS);
    warm.sweep.unref();
  }

  private async create(warm: Warm, plan: SandboxPlan): Promise<{ id: string; runtime: 'runsc' | 'runc' } | ToolFailure> {
    const runtime = await this.deps.runtime();
    if (runtime instanceof ToolFailure) return runtime;
    const workspace = await this.deps.workspace(warm.group);
    const prepared = plan.prepare ? await plan.prepare() : null;
    warm.close = prepared?.close ?? null;
    const spec: SandboxSpec = {
      name: `carapace-${this.deps.instance}-${warm.group}-${plan.label}-${warm.session.slice(-6)}-${Date.now().toString(36)}`,
      image: plan.image,
      instance: this.deps.instance,
      group: warm.group,
      session: warm.session,
      runtime,
      workspace,
      limits: this.deps.limits,
      ...(prepared ? { extra: prepared.extra } : {}),
    };
    let id: string | null = null;
    try {
      const container = await this.deps.docker.createContainer(sandboxCreateOptions(spec));
      id = container.id;
      await container.start();
    } catch (err) {
      await this.remove(warm, id);
      // The image is looked for only when the container could not be made (one engine call fewer per cold run).
      const present = id !== null || (await this.deps.docker.getImage(plan.image).inspect().then(() => true, () => false));
      if (!present) return sandboxError('SANDBOX_UNAVAILABLE', `the sandbox image ${plan.image} is missing: programs cannot run until the operator builds it (make images)`, false);
      throw err;
    }
    return { id, runtime };
  }

  /** Removes a sandbox and its /out volume (one already gone is fine), then what its plan prepared. */
  private async remove(warm: Warm, id: string | null): Promise<void> {
    if (id) await this.deps.docker.getContainer(id).remove({ force: true, v: true }).catch(() => undefined);
    const close = warm.close;
    warm.close = null;
    close?.();
  }
}
