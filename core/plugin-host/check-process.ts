// A plugin's connection check where it runs: in its own process when that is running, or
// (it failed to start: a refused password is the usual reason, and the very thing a check
// should show) in a process started for the check alone, as the plugin's uid, with its
// settings and its network relay, whose handler is loaded but never initialized, and
// which ends with the check. The host runs such a process only while no other of the
// plugin's is running or starting (the end of one sweeps every process of its uid), and in
// its queue of configurations, so that a new configuration never starts the plugin beside it.
import { randomUUID } from 'node:crypto';
import type { HostToCore } from '../src/plugins/host-protocol.js';
import { PluginProcess } from './plugin-process.js';

type HookResult = Extract<HostToCore, { t: 'hook_result' }>;

/** The check's process is stopped after this long at most (the core waits 15 s). */
const CHECK_PROCESS_MS = 15_000;

/**
 * `child`: the plugin's process, if the host has one. Null: the running process was asked
 * (its answer comes as its own hook_result). Otherwise the result.
 */
export async function connectionCheck(hid: string, child: PluginProcess | undefined, inQueue: (task: () => Promise<HookResult>) => Promise<HookResult>): Promise<HookResult | null> {
  const fail = (detail: string): HookResult => ({ t: 'hook_result', hid, ok: false, detail });
  if (!child) return fail('the plugin is not running: it is not set up (see its row above)');
  if (child.ready) return child.hook({ t: 'hook', hid, hook: 'connection_check' }) ? null : fail('the plugin is not running');
  if (!child.retired) return fail('the plugin is starting: try again in a moment');
  return inQueue(async () => {
    // A process that failed its start is being ended: a moment.
    for (const deadline = Date.now() + 3000; child.retired && !child.gone && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
    // Looked at again in the queue: a configuration applied meanwhile may have started it.
    if (!child.gone) return fail('the plugin is starting: try again in a moment');
    return { ...(await inOwnProcess(child)), hid };
  });
}

function inOwnProcess(plugin: PluginProcess): Promise<HookResult> {
  const { start, ids, env } = plugin.launch;
  const hid = randomUUID();
  return new Promise<HookResult>((resolve) => {
    let settled = false;
    const done = (result: Omit<HookResult, 't' | 'hid'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void check.stop(1000).catch(() => undefined).finally(() => resolve({ t: 'hook_result', hid, ...result }));
    };
    const timer = setTimeout(() => done({ ok: false, detail: `no answer within ${CHECK_PROCESS_MS / 1000} s` }), CHECK_PROCESS_MS);
    const check: PluginProcess = new PluginProcess({
      start: { ...start, mode: 'check', panelSocket: null },
      ids,
      env,
      events: {
        init: (result) => {
          if (!result.ok) return done({ ok: false, detail: `the plugin could not be loaded for the check (${result.category}): ${result.detail.split('\n', 1)[0]}` });
          if (!check.hook({ t: 'hook', hid, hook: 'connection_check' })) done({ ok: false, detail: 'the check\'s process was not ready' });
        },
        hookResult: (message) => done({ ok: message.ok, ...(message.value === undefined ? {} : { value: message.value }), ...(message.detail === undefined ? {} : { detail: message.detail }) }),
        down: (detail) => done({ ok: false, detail: `the check's process ended (${detail})` }),
        response: () => undefined,
        fault: (detail) => process.stderr.write(`${JSON.stringify({ level: 40, service: 'plugin-host', plugin: start.plugin, msg: `connection check: ${detail}` })}\n`),
        // A check asks the core for nothing and publishes nothing.
        service: () => undefined,
        publish: (_message, answer) => answer('a connection check publishes nothing'),
      },
    });
    check.start();
  });
}
