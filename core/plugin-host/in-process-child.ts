// The plugin host's shape before one process per plugin, kept only as the benchmark's
// baseline (bench/single-host.ts): the plugin's runner inside the host's own process, spoken
// to as if it were a child. No uid, no memory of its own, no isolation: the appliance never
// uses it.
import { EventEmitter } from 'node:events';
import type { RunnerToSupervisor, SupervisorToRunner } from './child-protocol.js';
import { PluginRunner } from './runner/plugin-runner.js';

export class InProcessChild extends EventEmitter {
  readonly pid = process.pid;
  connected = true;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  private readonly runner = new PluginRunner((message: RunnerToSupervisor) => queueMicrotask(() => this.emit('message', message)));

  send(message: SupervisorToRunner): boolean {
    if (!this.connected) return false;
    queueMicrotask(() => this.runner.receive(message));
    return true;
  }

  /** The channel's end: the exit (kill) says the rest. */
  close(): void {
    this.connected = false;
  }

  /** Ends the channel (the handler's code cannot be stopped: it shares this process). */
  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (!this.connected) return false;
    this.connected = false;
    this.signalCode = signal;
    queueMicrotask(() => this.emit('exit', null, signal));
    return true;
  }
}
