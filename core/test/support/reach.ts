// What an agent can reach, tried from inside its container: a node one-liner (node is in
// the agent image) connects to each target and says what happened. The target list is
// one argv entry, so nothing is quoted through a shell.

/** A TCP address, or a unix socket path as the container sees it. */
export type Target = { host: string; port: number } | { path: string };

/**
 * "connected", an errno code (ENETUNREACH, ECONNREFUSED, ENOTFOUND, ...) or "timeout".
 * The inner 5 s limit only keeps a silently dropped SYN from hanging the exec; the
 * tests never accept "timeout" as unreachable.
 */
export type Outcome = string;

const PROBE = `
const net = require('node:net');
const targets = JSON.parse(process.argv[1]);
Promise.all(targets.map((t) => new Promise((resolve) => {
  const socket = net.connect(t);
  const timer = setTimeout(() => { socket.destroy(); resolve('timeout'); }, 5000);
  socket.once('connect', () => { clearTimeout(timer); socket.destroy(); resolve('connected'); });
  socket.once('error', (err) => { clearTimeout(timer); resolve(err.code || err.message); });
}))).then((outcomes) => console.log(JSON.stringify(outcomes)));
`;

/** The command that probes `targets` when run inside a container as the agent's user. */
export function probeCommand(targets: Target[]): string[] {
  return ['node', '-e', PROBE, JSON.stringify(targets)];
}

/** Parses the probe's output into target → outcome. */
export function probeOutcomes(targets: Target[], stdout: string): Record<string, Outcome> {
  const outcomes = JSON.parse(stdout.trim().split('\n').at(-1) ?? '[]') as Outcome[];
  if (outcomes.length !== targets.length) throw new Error(`the probe answered for ${outcomes.length} of ${targets.length} targets: ${stdout}`);
  return Object.fromEntries(targets.map((t, i) => ['path' in t ? t.path : `${t.host}:${t.port}`, outcomes[i]]));
}
