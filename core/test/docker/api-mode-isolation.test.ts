// API mode reaches no more than legacy mode (DESIGN.md decision 9): attacks from inside a
// real API-mode agent container (docker exec as uid 1000, node's raw sockets) on the
// Docker host, another group's agent, the core's admin API, a host port and the internet.
// Two groups' agents run side by side; every listener the tests open is on this machine,
// and the tests check the container has no route off it before they try a public
// address, so no packet leaves the machine whatever the code under test does.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { freePort, Stack } from '../harness.js';
import { newAgentManager, testRuntime, sh } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';
import { bridgeGateway } from '../support/compose.js';
import { probeCommand, probeOutcomes, type Target } from '../support/reach.js';

const MODEL_KEY = 'sk-ant-api03-isolation-model-key-0123456789abcdef';
const ADMIN_TOKEN = 'isolation-admin-token-0123456789';
const DOCKER = process.env.DOCKER || 'docker';
/** The interfaces, from /proc/net/dev (gVisor has no /sys/class/net). */
const INTERFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '";
/** No route: Linux says ENETUNREACH, gVisor EHOSTUNREACH; both refuse at once. */
const UNREACHABLE = /^E(NET|HOST)UNREACH$/;
/** The port the agent's API server used to listen on (TCP) before it moved to a unix socket. */
const OLD_API_PORT = 8080;

/** A TCP listener on the host that counts who connected to it. */
interface Listener {
  server: Server;
  port: number;
  connections: number;
}

async function listen(host: string): Promise<Listener> {
  const listener: Listener = { server: createServer(), port: 0, connections: 0 };
  listener.server.on('connection', (socket) => {
    listener.connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    listener.server.once('error', reject);
    listener.server.listen(0, host, () => resolve());
  });
  listener.port = (listener.server.address() as { port: number }).port;
  return listener;
}

let stack: Stack;
let standIn: AnthropicStandIn;
let runtime: DockerRuntime;
let manager: AgentManager;
let admin: FastifyInstance;
let adminPort: number;
let gateway: string;
let onGateway: Listener;
let onLoopback: Listener;
let family: string;
let friends: string;

/** Connects from inside the family's agent, as the agent's user. */
async function probe(targets: Target[]): Promise<Record<string, string>> {
  const r = await runtime.exec(family, probeCommand(targets), 30_000);
  if (r.exitCode !== 0) throw new Error(`the probe failed: ${r.stderr}`);
  return probeOutcomes(targets, r.stdout);
}

beforeAll(async () => {
  gateway = bridgeGateway(DOCKER);
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {}, friends: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  manager = newAgentManager(stack, { upstream, apiKey: MODEL_KEY, agents: { mode: 'api', run_timeout_ms: 120_000 }, instance: `iso-${process.pid}`, runtime, groups: ['family', 'friends'] });
  await manager.removeOrphans();
  // The admin API as compose runs it: on every interface (CARAPACE_ADMIN_HOST 0.0.0.0).
  adminPort = await freePort();
  admin = await startAdminApi(stack.core, '0.0.0.0', adminPort, ADMIN_TOKEN);
  onGateway = await listen(gateway);
  onLoopback = await listen('127.0.0.1');
  const [a, b] = await Promise.all([manager.enqueue('family', 'warm up'), manager.enqueue('friends', 'warm up')]);
  if (!a.ok || !b.ok) throw new Error(`the agents did not start: ${JSON.stringify([a, b])}`);
  family = manager.live('family')!.container;
  friends = manager.live('friends')!.container;
}, 180_000);

afterAll(async () => {
  await manager?.stop();
  await admin?.close();
  onGateway?.server.close();
  onLoopback?.server.close();
  await standIn?.stop();
  await stack?.stop();
}, 60_000);

describe('an API-mode agent reaches only its own session sockets', () => {
  it('has no network interface but loopback, hence no route off the container', async () => {
    const info = await runtime.inspect(family);
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect((await sh(runtime, family, INTERFACES)).out.trim().split(/\s+/)).toEqual(['lo']);
    // The main routing table is empty: not even a default route.
    expect((await sh(runtime, family, 'tail -n +2 /proc/net/route')).out.trim()).toBe('');
  });

  it('cannot reach a listener on the Docker bridge gateway (the host)', async () => {
    const outcomes = await probe([{ host: gateway, port: onGateway.port }]);
    expect(outcomes).toEqual({ [`${gateway}:${onGateway.port}`]: expect.stringMatching(UNREACHABLE) });
    expect(onGateway.connections).toBe(0);
  });

  it('cannot reach a public address: refused at once as unreachable, never a timeout', async () => {
    // Checked first, so that no packet is sent off the machine if the code is wrong.
    expect((await sh(runtime, family, INTERFACES)).out.trim()).toBe('lo');
    const targets: Target[] = [
      { host: '203.0.113.10', port: 443 }, // TEST-NET-3
      { host: '2001:db8::10', port: 443 }, // IPv6 documentation prefix
    ];
    expect(Object.values(await probe(targets))).toEqual([expect.stringMatching(UNREACHABLE), expect.stringMatching(UNREACHABLE)]);
  });

  it("cannot reach another group's agent API server, by address or by name", async () => {
    const other = await runtime.inspect(friends);
    const addresses = Object.values(other.NetworkSettings.Networks ?? {}).flatMap((n) => [n.IPAddress, n.GlobalIPv6Address]).filter((a) => a);
    const names = [other.Name.replace(/^\//, ''), other.Config.Hostname];
    const targets: Target[] = [...addresses, ...names].map((host) => ({ host, port: OLD_API_PORT }));
    const outcomes = await probe(targets);
    for (const [target, outcome] of Object.entries(outcomes)) {
      expect([target, outcome]).toEqual([target, expect.stringMatching(/^(ENETUNREACH|EHOSTUNREACH|ECONNREFUSED|ENOTFOUND|EAI_AGAIN)$/)]);
    }
    // The other agent has no address at all: only its unix socket, in a directory this one cannot see.
    expect(addresses).toEqual([]);
  });

  it('sees no unix socket but its own: the session ones and its API server', async () => {
    const session = manager.live('family')!.session;
    const mount = (await runtime.inspect(family)).Mounts.find((m) => m.Destination === '/run/carapace');
    expect(mount?.Source.endsWith(`/sessions/${session}`)).toBe(true);
    const r = await sh(runtime, family, 'find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null; true');
    // /tmp is the container's own tmpfs (Claude Code keeps a socket there): nothing outside shares it.
    const sockets = r.out.trim().split('\n').filter((p) => !p.startsWith('/tmp/'));
    expect(sockets.sort()).toEqual(['/run/api/api.sock', '/run/carapace/carapace.sock', '/run/carapace/llm.sock']);
  });

  it("cannot reach the core's admin API, even listening on every interface", async () => {
    const outcomes = await probe([
      { host: gateway, port: adminPort },
      { host: '127.0.0.1', port: adminPort },
    ]);
    expect(outcomes).toEqual({ [`${gateway}:${adminPort}`]: expect.stringMatching(UNREACHABLE), [`127.0.0.1:${adminPort}`]: 'ECONNREFUSED' });
  });

  it("cannot reach a port on the host's loopback: the container's loopback is its own", async () => {
    const outcomes = await probe([{ host: '127.0.0.1', port: onLoopback.port }]);
    expect(outcomes).toEqual({ [`127.0.0.1:${onLoopback.port}`]: 'ECONNREFUSED' });
    expect(onLoopback.connections).toBe(0);
  });
});
