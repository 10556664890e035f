// A plugin's own process, started by the plugin host with nothing but its own
// configuration (sent over its channel on fd 3, never in the environment), its own data
// folder and, when the host runs as root, its own uid. It ends with the host.
import { fstatSync } from 'node:fs';
import { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import pino from 'pino';
import type { RunnerToSupervisor, SupervisorToRunner } from '../child-protocol.js';
import { onMigration } from '../../src/state/format-migrations.js';
import { StrayErrors } from '../stray-errors.js';
import { PluginRunner } from './plugin-runner.js';

/** The host's channel: JSON lines on a socket pair at fd 3 (runner-channel.ts is the host's end). */
const CHANNEL_FD = 3;
/** fetch() connections a plugin keeps per host (the relay allows 64 tunnels a plugin). */
const CONNECTIONS_PER_HOST = 16;

try {
  if (!fstatSync(CHANNEL_FD).isSocket()) throw new Error('not a socket');
} catch {
  process.stderr.write('carapace plugin runner: started without its channel on fd 3 (the plugin host starts it)\n');
  process.exit(2);
}
const channel = new Socket({ fd: CHANNEL_FD, readable: true, writable: true });

// What is said in one turn of the event loop (the answers to one batch of requests)
// leaves in one write: one system call and one wake-up of the host, not one each.
let out: string[] = [];
const flush = (): void => {
  const text = out.length === 1 ? out[0] : out.join('');
  out = [];
  channel.write(text, (err) => {
    if (err) process.exit(0);
  });
};
// The host is gone (or going): nothing this process does can reach anyone, and it must
// not go on as if it had (a plugin saving its progress past an event that was lost).
const send = (message: RunnerToSupervisor): void => {
  if (channel.destroyed || !channel.writable) process.exit(0);
  if (out.push(`${JSON.stringify(message)}\n`) === 1) setImmediate(flush);
};
// In order, each once the start is prepared.
let prepared: Promise<void> = Promise.resolve();

// Its request lane to the core on fd 4, when the host gave it one (the core's
// request-lanes.ts): requests and cancels come in there, their answers go back there.
const LANE_FD = 4;
let lane: Socket | null = null;
try {
  if (fstatSync(LANE_FD).isSocket()) lane = new Socket({ fd: LANE_FD, readable: true, writable: true });
} catch {
  // none: every request comes through the host
}
/** Requests that came on the lane, until answered. */
const onLane = new Set<string>();
const runner = new PluginRunner((message) => {
  if (message.t === 'response' && onLane.delete(message.rid)) lane?.write(`${JSON.stringify(message)}\n`);
  else send(message);
});
if (lane) {
  const from = lane;
  from.on('error', () => undefined);
  // A closed lane (the core restarted): requests come through the host again.
  from.on('close', () => onLane.clear());
  const reader = createInterface({ input: from, crlfDelay: Infinity });
  // readline passes its input's errors on (a reset when the core closed the lane).
  reader.on('error', () => undefined);
  reader.on('line', (line: string) => {
    const message = JSON.parse(line) as Extract<SupervisorToRunner, { t: 'request' | 'cancel' }>;
    if (message.t === 'request') onLane.add(message.rid);
    void prepared.then(() => runner.receive(message));
  });
}
channel.on('close', () => process.exit(0));
channel.on('error', () => process.exit(0));
// The host's SIGTERM is for the host: it shuts each plugin down in turn.
process.on('SIGTERM', () => undefined);
process.on('SIGINT', () => undefined);

/** What the plugin's process needs before its handler loads: error reporting and its way out. */
async function prepare(message: Extract<SupervisorToRunner, { t: 'start' }>): Promise<void> {
  const log = pino({ base: { service: 'plugin', plugin: message.plugin } }, pino.destination(2));
  new StrayErrors({
    plugin: message.plugin,
    report: (text) => void runner.callCore(null, null, 'reportFault', { message: text }).catch(() => undefined),
    // A moment for the report to leave.
    afterException: () => setTimeout(() => process.exit(70), 100).unref(),
    log,
  }).install();
  // Its stores' format migrations, for Activity (format-migrations.ts).
  onMigration((m) => void runner.callCore(null, null, 'reportMigration', { ...m }).catch(() => undefined));
  if (!message.egressProxy) {
    // No host in its manifest: nowhere to go, said plainly (and no proxy client loaded).
    const refusal = Object.assign(new Error(`plugin "${message.plugin}" declares no network host in its manifest`), { code: 'EGRESS_NOT_DECLARED' });
    globalThis.fetch = () => Promise.reject(new TypeError('fetch failed', { cause: refusal }));
    return;
  }
  // fetch() goes out through the host's relay for this plugin, which allows only the
  // hosts its manifest declares. (Where the host has no network, it is the only way.)
  const { ProxyAgent, setGlobalDispatcher } = await import('undici');
  const url = new URL(message.egressProxy);
  const token = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  // At most 16 connections per host, reused: a burst (a flood of strangers to answer) waits
  // here for one instead of opening a tunnel each, past the relay's cap of 64 a plugin.
  setGlobalDispatcher(new ProxyAgent({ uri: `${url.protocol}//${url.host}`, token, connections: CONNECTIONS_PER_HOST }));
}

createInterface({ input: channel, crlfDelay: Infinity }).on('line', (line: string) => {
  const message = JSON.parse(line) as SupervisorToRunner;
  if (message.t === 'start') {
    prepared = prepare(message).catch((err: unknown) => {
      process.stderr.write(`carapace plugin runner: could not prepare ${message.plugin}: ${String(err)}\n`);
      process.exit(70);
    });
  }
  void prepared.then(() => runner.receive(message));
});
