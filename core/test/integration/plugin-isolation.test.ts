// Plugins apart, tried as a hostile plugin would: the `snoop` fixture hunts for another
// plugin's secret (its own environment, every process's environment and command line in
// /proc), reads and writes outside its own data folder, reaches for hosts its manifest does
// not name, and spins its one thread; and one plugin's process is killed. Real plugin
// host, real processes. The tests run as root here and in CI, so each plugin runs as a
// uid of its own, as in the appliance; without root there is no uid to switch to.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chownSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { FAULTY_TOKEN, Stack, until } from '../harness.js';
import type { Session } from '../../src/boundary/session-table.js';

const SNOOP_TOKEN = 'snoop-own-token-8c1d2e3f';
const asRoot = process.getuid?.() === 0;
const describeAsRoot = asRoot ? describe : describe.skip;

let stack: Stack;
let family: Session;
let upstream: Server;
let upstreamUrl: string;
let hits = 0;
const dataRoot = (): string => join(stack.dir, 'data', 'plugins');

beforeAll(async () => {
  upstream = createServer((req, res) => {
    hits++;
    if (req.url === '/slow') setTimeout(() => res.end('slowly'), 300);
    else res.end('upstream says hi');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
  stack = await Stack.start({
    plugins: ['echo', 'faulty', 'snoop', 'hostile', 'offline'],
    env: { SNOOP_TOKEN },
    config: {
      groups: { family: {} },
      plugins: { faulty: { api_token: '${FAULTY_TOKEN}' }, snoop: { token: '${SNOOP_TOKEN}' } },
    },
  });
  family = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
  upstream?.close();
});

async function snoop(tool: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = await stack.ipc(family, `tool.invoke.${tool}`, args, { timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(`${tool}: ${JSON.stringify(r.err)}`);
  return r.out;
}

describeAsRoot('each plugin alone in its process, as its own uid', () => {
  it('runs as a uid of its own, with no secret in its environment', async () => {
    const me = await snoop('whoami');
    expect(me.uid).toBeGreaterThanOrEqual(20_001);
    expect(me.data_dir).toBe(join(dataRoot(), 'snoop'));
    expect(me.env_keys).toEqual(['HOME', 'PATH', 'SQLITE_TMPDIR', 'TMPDIR']);
    const { uids } = JSON.parse(readFileSync(join(dataRoot(), '.uids.json'), 'utf8')) as { uids: Record<string, number> };
    expect(new Set(Object.values(uids)).size).toBe(Object.keys(uids).length);
    expect(uids.snoop).toBe(me.uid);
    expect(statSync(join(dataRoot(), 'snoop')).uid).toBe(me.uid);
  });

  it("finds no other plugin's secret in any process's environment or command line, nor its own there", async () => {
    // The hunt works: it finds what is there to find (its own command line names the runner).
    expect((await snoop('hunt_secret', { secret: 'runner/main.js' })).found.length).toBeGreaterThan(0);
    // The plugin host holds faulty's token in its environment: no plugin can read it there.
    expect(readFileSync(`/proc/${stack.host!.pid}/environ`, 'latin1')).toContain(FAULTY_TOKEN);
    expect((await snoop('hunt_secret', { secret: FAULTY_TOKEN })).found).toEqual([]);
    expect((await snoop('hunt_secret', { secret: SNOOP_TOKEN })).found).toEqual([]);
  });

  it("cannot read or list another plugin's data, nor write outside its own folder", async () => {
    const faultyDir = join(dataRoot(), 'faulty');
    const planted = join(faultyDir, 'notes.json');
    writeFileSync(planted, '{"private":true}', { mode: 0o600 });
    chownSync(planted, statSync(faultyDir).uid, statSync(faultyDir).gid);
    expect(await snoop('read_path', { path: planted })).toEqual({ ok: false, code: 'EACCES' });
    expect(await snoop('list_dir', { path: faultyDir })).toEqual({ ok: false, code: 'EACCES' });
    // The plugins' data root can be passed through, not listed.
    expect(await snoop('list_dir', { path: dataRoot() })).toEqual({ ok: false, code: 'EACCES' });
    expect(await snoop('read_path', { path: join(dataRoot(), '.uids.json') })).toEqual({ ok: false, code: 'EACCES' });
    // The core's data folder, the plugins' folders, another plugin's folder: none writable.
    for (const path of [join(stack.dir, 'data', 'standing-approvals.json'), join(stack.dir, 'data', 'planted'), join(stack.pluginsDir, 'echo', 'handler.js'), join(faultyDir, 'planted'), join(stack.runDir, 'planted')]) {
      expect({ path, ...(await snoop('write_path', { path })) }).toEqual({ path, ok: false, code: 'EACCES' });
    }
    // Its own folder is its own.
    expect(await snoop('write_path', { path: join(dataRoot(), 'snoop', 'mine.txt') })).toEqual({ ok: true });
  });

  it("cannot reach the core's sockets", async () => {
    for (const socket of ['plugins.sock', 'bus-in.sock', 'bus-out.sock']) {
      const path = join(stack.runDir, socket);
      expect(statSync(path).isSocket()).toBe(true);
      expect({ socket, ...(await snoop('raw_connect', { path })) }).toEqual({ socket, ok: false, code: 'EACCES' });
    }
  });
});

describe('its network is its manifest', () => {
  it('fetch reaches a host the manifest names, and nothing else', async () => {
    // hostile declares 127.0.0.1 (any port); snoop only 127.0.0.1:1.
    expect(await stack.ipc(family, 'tool.invoke.fetch_upstream', { url: upstreamUrl, method: 'GET' })).toMatchObject({ code: 0, out: { status: 200, body: 'upstream says hi' } });
    expect(hits).toBe(1);
    expect(await snoop('fetch_url', { url: upstreamUrl })).toMatchObject({ ok: false });
    expect(hits).toBe(1);
    const refusal = /"plugin":"snoop","target":"127\.0\.0\.1:\d+","reason":"not in its manifest's network","msg":"egress refused"/;
    expect(await stack.hostSaid(refusal)).toMatch(refusal);
  });

  it('a burst of 100 requests at once all go through: the relay caps tunnels, so the plugin queues instead of being refused', async () => {
    const before = hits;
    const burst = await stack.ipc(family, 'tool.invoke.fetch_upstream', { url: `${upstreamUrl}slow`, method: 'GET', at_once: 100 });
    expect(burst).toMatchObject({ code: 0, out: { statuses: [200] } });
    expect(hits - before).toBe(100);
  });

  it("cannot go out through another plugin's relay: each opens only with its own plugin's token", async () => {
    const before = hits;
    // Every loopback listener asked for a tunnel to the upstream, which hostile's list allows.
    const answers = (await snoop('probe_relays', { target: new URL(upstreamUrl).host })) as { port: number; anonymous: string; own: string }[];
    const refused = (a: { anonymous: string; own: string }): boolean => a.anonymous.startsWith('HTTP/1.1 407') && a.own.startsWith('HTTP/1.1 407');
    // Relays are for plugins that name hosts: hostile's (and those of any other plugin host
    // on this machine) refuses snoop's own token as it refuses none; its own says "not your host".
    expect(answers.filter(refused).length).toBeGreaterThanOrEqual(1);
    expect(answers.filter((a) => a.anonymous.startsWith('HTTP/1.1 407') && a.own.startsWith('HTTP/1.1 403'))).toHaveLength(1);
    expect(answers.filter((a) => / 200 /.test(`${a.anonymous} ${a.own}`))).toEqual([]);
    expect(hits).toBe(before);
  });

  it('a plugin that names no host has no way out, and its fetch says why', async () => {
    const r = await stack.ipc(family, 'tool.invoke.fetch_offline', { url: upstreamUrl });
    expect(r.out).toEqual({ ok: false, code: 'EGRESS_NOT_DECLARED', message: 'plugin "offline" declares no network host in its manifest' });
    expect(stack.hostOutput).not.toContain('"plugin":"offline","target"');
  });
});

describe('its requests are its own', () => {
  it("a service call naming another plugin's request id is refused (the core takes a request only as its own plugin's)", async () => {
    const slow = stack.ipc(family, 'tool.invoke.slow', { ms: 3000 }, { timeoutMs: 30_000 });
    // The id is random and never shown to a plugin; the test hands it over as if it had leaked.
    const inFlight = (stack.core as unknown as { hostLink: { inFlight: Map<string, { plugin: string }> } }).hostLink.inFlight;
    const rid = await until(() => [...inFlight].find(([, e]) => e.plugin === 'faulty')?.[0], 5000);
    const answer = await snoop('service_as', { rid, method: 'getSessionInfo' });
    expect(answer).toMatchObject({ t: 'service_result', ok: false, message: 'request context belongs to another plugin' });
    expect((await slow).code).toBe(0);
  });
});

describe("one plugin's trouble is its own", () => {
  it('a busy loop in one plugin leaves the others answering at once', async () => {
    const spinning = stack.ipc(family, 'tool.invoke.busy', { ms: 3000 }, { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    expect((await stack.ipc(family, 'tool.invoke.echo', { text: 'while it spins' })).out?.echoed?.text).toBe('while it spins');
    expect(Date.now() - started).toBeLessThan(1500);
    expect((await spinning).code).toBe(0);
  });

  it('kill -9 of one plugin\'s process: the others answer, its tools say unavailable, and it comes back', async () => {
    const { pid } = await snoop('whoami');
    process.kill(pid, 'SIGKILL');
    await until(() => stack.core.catalog.state('snoop') === 'starting', 5000);
    // What the Overview and the doctor show meanwhile.
    expect(stack.core.catalog.states().find((p) => p.name === 'snoop')?.detail).toBe('its process ended (killed by SIGKILL); starting it again');
    const meanwhile = await stack.ipc(family, 'tool.invoke.whoami', {});
    expect(meanwhile.err).toMatchObject({ code: 'PLUGIN_UNAVAILABLE', retriable: true });
    expect((await stack.ipc(family, 'tool.invoke.echo', { text: 'still here' })).out?.echoed?.text).toBe('still here');
    await until(() => stack.core.catalog.state('snoop') === 'healthy', 10_000);
    const again = await snoop('whoami');
    expect(again.pid).not.toBe(pid);
    expect(stack.host?.exitCode).toBeNull();
  });
});
