// The disk quota on a real Docker engine: a hostile agent (uid 1000, docker exec) tries
// to fill the host's disk through its workspace and its Claude state. Small on purpose:
// 100 MB written against a 32 MiB workspace quota and a 16 MiB state quota.
// QUOTA_TEST_MB=0 runs the same attacks with quotas off (the old bind mounts): they must
// then fail, which is how this suite is shown to be able to fail.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, lstatSync, rmSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { LoopStorage } from '../../src/agents/storage.js';
import { eventually, Stack, until } from '../harness.js';
import { newAgentManager, testRuntime, sh as shIn } from '../support/agents.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';

const QUOTA_MB = Number(process.env.QUOTA_TEST_MB ?? 32);
const STATE_MB = 16;
const MiB = 1024 * 1024;
const GROUP = 'quota';
const WD_GROUP = 'watched';
let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let standInUrl: Promise<string>;

/** Bytes really allocated on the host under `dir` (what a filled disk is made of). */
function allocated(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += lstatSync(path).blocks * 512;
    if (entry.isDirectory()) total += allocated(path);
  }
  return total;
}

const container = () => manager.live(GROUP)!.container;
const sh = (script: string) => shIn(runtime, container(), script);
const hostBytes = () => allocated(join(stack.dir, 'groups')) + allocated(join(stack.dir, 'state'));

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { [GROUP]: {}, [WD_GROUP]: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  standInUrl = standIn.start();
  const upstream = await standInUrl;
  runtime = testRuntime();
  // A workspace from before quotas: it must come along.
  mkdirSync(join(stack.dir, 'groups', GROUP, 'notes'), { recursive: true });
  writeFileSync(join(stack.dir, 'groups', GROUP, 'notes', 'old.txt'), 'written before the upgrade');
  manager = newAgentManager(stack, {
    upstream,
    apiKey: 'sk-test',
    agents: { run_timeout_ms: 60_000, disk_quota_mb: QUOTA_MB, state_quota_mb: STATE_MB },
    instance: `quota-${process.pid}`,
    groups: [GROUP],
    runtime,
  });
  await manager.removeOrphans();
  expect((await manager.enqueue(GROUP, 'warm up')).ok).toBe(true);
}, 120_000);

afterAll(async () => {
  await manager?.stop();
  if (manager?.storage instanceof LoopStorage) await manager.storage.destroy(GROUP, true);
  await standIn?.stop();
  await stack?.stop();
}, 60_000);

describe('disk quota', () => {
  it('is in force: the workspace is a quota-held volume, the state a sized tmpfs', async () => {
    expect(manager.storage.mode).toBe('loop');
    const info = await runtime.inspect(container());
    const byTarget = Object.fromEntries(info.Mounts.map((m) => [m.Destination, m]));
    expect(byTarget['/workspace/group']).toMatchObject({ Type: 'volume', RW: true });
    expect(info.HostConfig.Tmpfs?.['/home/node/.claude']).toContain(`size=${STATE_MB}m`);
  });

  it('brought the workspace from before quotas along, and kept the old folder', async () => {
    expect((await sh('cat /workspace/group/notes/old.txt')).out).toBe('written before the upgrade');
    expect((await sh('stat -c %u /workspace/group /workspace/group/notes/old.txt')).out.trim().split('\n')).toEqual(['1000', '1000']);
    expect(readFileSync(join(stack.dir, 'groups', `${GROUP}.pre-quota`, 'notes', 'old.txt'), 'utf8')).toBe('written before the upgrade');
  });

  it('fallocate and dd past the quota fail with ENOSPC, and the host gains at most the quota', async () => {
    const before = hostBytes();
    const falloc = await sh('fallocate -l 100M /workspace/group/big');
    expect(falloc.code).not.toBe(0);
    expect(falloc.err).toMatch(/No space left on device/);
    const dd = await sh('dd if=/dev/urandom of=/workspace/group/big2 bs=1M count=100');
    expect(dd.code).not.toBe(0);
    expect(dd.err).toMatch(/No space left on device/);
    // And through the state folder: a tmpfs of its own size, nothing on the host's disk.
    const state = await sh('dd if=/dev/zero of=/home/node/.claude/fill bs=1M count=100');
    expect(state.code).not.toBe(0);
    expect(state.err).toMatch(/No space left on device/);
    expect(hostBytes() - before).toBeLessThanOrEqual(QUOTA_MB * MiB);
    await sh('rm -f /home/node/.claude/fill');
  }, 60_000);

  it('keeps Claude Code working while the workspace is full', async () => {
    await sh('fallocate -l 100M /workspace/group/big3; dd if=/dev/zero of=/workspace/group/big4 bs=1M count=100');
    expect((await sh('df --output=avail -B1 /workspace/group | tail -1')).out.trim()).toBe('0');
    expect((await sh('echo state > /home/node/.claude/probe && cat /home/node/.claude/probe')).out.trim()).toBe('state');
    expect((await manager.enqueue(GROUP, 'still there?')).ok).toBe(true);
    await sh('rm -f /workspace/group/big* /home/node/.claude/probe');
  }, 60_000);

  it('keeps what was written within the quota for the next container, and after a core restart', async () => {
    expect((await sh('mkdir -p sub && head -c 4000000 /dev/urandom > sub/data && sha256sum sub/data')).code).toBe(0);
    const sum = (await sh('sha256sum sub/data')).out.split(' ')[0];
    const first = container();
    await manager.retire(GROUP);
    expect((await manager.enqueue(GROUP, 'again')).ok).toBe(true);
    expect(container()).not.toBe(first);
    expect((await sh('sha256sum sub/data')).out.split(' ')[0]).toBe(sum);
    // A new storage (as a restarted core has) finds the same images and devices.
    if (manager.storage instanceof LoopStorage) {
      await manager.retire(GROUP);
      const fresh = new LoopStorage(runtime, { groupsDir: join(stack.dir, 'groups'), instance: `quota-${process.pid}` }, { image: process.env.CARAPACE_AGENT_IMAGE || 'carapace-agent:latest', disk_quota_mb: QUOTA_MB });
      const mounts = await fresh.mounts(GROUP);
      expect(mounts.map((m) => m.target)).toEqual(['/workspace/group']);
      expect((await manager.enqueue(GROUP, 'after restart')).ok).toBe(true);
      expect((await sh('sha256sum sub/data')).out.split(' ')[0]).toBe(sum);
    }
  }, 120_000);

  it('grows a group\'s file system, data kept, when the quota is raised', async () => {
    if (!(manager.storage instanceof LoopStorage)) throw new Error('quotas are off');
    await sh('echo kept > kept.txt');
    await manager.retire(GROUP);
    // As a core restarted with a higher agents.disk_quota_mb does on the group's next start.
    const raised = new LoopStorage(runtime, { groupsDir: join(stack.dir, 'groups'), instance: `quota-${process.pid}` }, { image: process.env.CARAPACE_AGENT_IMAGE || 'carapace-agent:latest', disk_quota_mb: QUOTA_MB * 2 });
    await raised.mounts(GROUP);
    expect(statSync(join(stack.dir, 'groups', `${GROUP}.img`)).size).toBe(QUOTA_MB * 2 * MiB);
    expect((await manager.enqueue(GROUP, 'bigger')).ok).toBe(true);
    expect((await sh('cat kept.txt')).out.trim()).toBe('kept');
    const size = Number((await sh('df --output=size -B1 /workspace/group | tail -1')).out.trim());
    expect(size).toBeGreaterThan(QUOTA_MB * MiB);
    expect(size).toBeLessThanOrEqual(QUOTA_MB * 2 * MiB);
  }, 120_000);

  it('is whole again after its volumes were removed and its loop devices detached behind the core\'s back', async () => {
    if (!(manager.storage instanceof LoopStorage)) throw new Error('quotas are off');
    if (!manager.live(GROUP)) await manager.enqueue(GROUP, 'start');
    await sh('echo kept > kept.txt');
    await manager.retire(GROUP);
    // Behind its back: another LoopStorage (as an operator's `docker volume rm` and `losetup -d`).
    const other = new LoopStorage(runtime, { groupsDir: join(stack.dir, 'groups'), instance: `quota-${process.pid}` }, { image: process.env.CARAPACE_AGENT_IMAGE || 'carapace-agent:latest', disk_quota_mb: QUOTA_MB });
    await other.destroy(GROUP, false); // volumes gone, devices detached, images kept
    for (const p of manager.storage.plans(GROUP)) await expect(runtime.docker.getVolume(p.volume).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await manager.enqueue(GROUP, 'back')).ok).toBe(true);
    expect((await sh('cat kept.txt')).out.trim()).toBe('kept');
    const dd = await sh('dd if=/dev/zero of=/workspace/group/big bs=1M count=100');
    expect(dd.err).toMatch(/No space left on device/);
    await sh('rm -f /workspace/group/big');
  }, 120_000);

  it('allocates every block of the image on the host (the quota is space the group really has) and keeps it private', () => {
    // Issue 22: a sparse image on a full host disk took the agent's writes into the page
    // cache, said "created", and kept zeroes.
    const image = join(stack.dir, 'groups', `${GROUP}.img`);
    expect(existsSync(image)).toBe(true);
    expect(statSync(image).blocks * 512).toBeGreaterThanOrEqual(statSync(image).size);
    expect(statSync(image).mode & 0o777).toBe(0o600);
  });

  // Issue 22: an I/O error under a workspace reached nobody. The kernel's own fault injection
  // (ext4's trigger_fs_error on the workspace's loop device) makes a real file system error.
  (process.getuid?.() === 0 ? it : it.skip)('a file system error under the workspace stops its agent, CRITICAL in the audit, the person told', async () => {
    const image = join(stack.dir, 'groups', `${GROUP}.img`);
    const device = execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).split(':')[0].trim();
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    const id = container();
    const told: unknown[] = [];
    const publish = stack.core.publish.bind(stack.core);
    stack.core.publish = (topic, group, payload, ...rest) => {
      if (topic === 'user.notify' && group === GROUP) told.push(payload.text);
      return publish(topic, group, payload, ...rest);
    };
    writeFileSync(`/sys/fs/ext4/${device.replace('/dev/', '')}/trigger_fs_error`, 'carapace fault injection');
    const entry = await until(() => stack.core.audit.query({ group: GROUP }).find((e) => e.code === 'WORKSPACE_FS_ERROR'), 20_000);
    expect(entry).toMatchObject({ severity: 'CRITICAL', reason: expect.stringContaining('counted 1 error(s)') });
    await until(() => manager.live(GROUP) === null, 10_000);
    await eventually(() => runtime.inspect(id).then(() => false, (e: { statusCode?: number }) => e.statusCode === 404));
    expect(stack.core.audit.query({ group: GROUP }).some((e) => e.reason === 'agent stopped: its workspace file system reported an error')).toBe(true);
    expect(told).toEqual([expect.stringContaining('the storage of this group\'s files reported an error')]);
    stack.core.publish = publish;
  }, 60_000);

  // Issue 22: a crash between the seeded image and the old folder's rename left the folder
  // under its live name for good. The next attach finishes the migration.
  it('finishes a migration a crash cut short: an old folder beside its image is set aside at the next attach', async () => {
    const groups = join(stack.dir, 'groups');
    const before = readdirSync(groups).filter((n) => n.startsWith(`${GROUP}.pre-quota`)).length;
    mkdirSync(join(groups, GROUP, 'notes'), { recursive: true });
    writeFileSync(join(groups, GROUP, 'notes', 'left.txt'), 'left under its live name by a crash');
    await (manager.storage as LoopStorage).destroy(GROUP, false); // the next start attaches anew
    expect((await manager.enqueue(GROUP, 'hello again')).ok).toBe(true);
    expect(existsSync(join(groups, GROUP))).toBe(false);
    const aside = readdirSync(groups).filter((n) => n.startsWith(`${GROUP}.pre-quota`));
    expect(aside).toHaveLength(before + 1);
    expect(aside.some((n) => existsSync(join(groups, n, 'notes', 'left.txt')))).toBe(true);
  }, 60_000);
});

// Where no loop device can be had (rootless engines): the watchdog. Weaker, so the test
// asks less: the write succeeds, but the agent is stopped and the user told, and the
// group does not start again until space is freed.
describe('disk quota, watchdog mode', () => {
  let watched: AgentManager;
  const notices: { topic: string; group: string | null; text: unknown }[] = [];

  beforeAll(async () => {
    const publish = stack.core.publish.bind(stack.core);
    stack.core.publish = (topic, group, payload, ...rest) => {
      notices.push({ topic, group, text: payload.text });
      return publish(topic, group, payload, ...rest);
    };
    watched = newAgentManager(stack, {
      upstream: await standInUrl,
      apiKey: 'sk-test',
      agents: { run_timeout_ms: 60_000, disk_quota_mb: QUOTA_MB, state_quota_mb: STATE_MB, disk_quota_mode: 'watchdog' },
      instance: `quota-wd-${process.pid}`,
      groups: [WD_GROUP],
      runtime,
    });
    expect((await watched.enqueue(WD_GROUP, 'warm up')).ok).toBe(true);
  }, 120_000);

  afterAll(async () => {
    await watched?.stop();
  });

  it('stops the agent that writes past the quota, tells the user, and does not start it again until space is freed', async () => {
    expect(watched.storage.mode).toBe('watchdog');
    const id = watched.live(WD_GROUP)!.container;
    await shIn(runtime, id, 'fallocate -l 100M /workspace/group/big');
    // The watchdog looks every 5 s: wait for it (no timing asserted).
    const gone = () => runtime.inspect(id).then(() => false, (e: { statusCode?: number }) => e.statusCode === 404);
    for (let i = 0; i < 300 && !(await gone()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await gone()).toBe(true);
    expect(watched.live(WD_GROUP)).toBeNull();
    const notice = notices.find((n) => n.topic === 'user.notify' && n.group === WD_GROUP);
    expect(String(notice?.text)).toMatch(/over the quota of \d+ MB/);
    const full = await watched.enqueue(WD_GROUP, 'still full').then((r) => JSON.stringify(r), (e: Error) => e.message);
    expect(full).toMatch(/over its quota/);
    rmSync(join(stack.dir, 'groups', WD_GROUP, 'big'));
    expect((await watched.enqueue(WD_GROUP, 'room again')).ok).toBe(true);
  }, 120_000);
});

// Issue 22: the host's disk cannot hold a new group's workspace. Its folder is a 24 MiB
// tmpfs, less than the 32 MiB quota: the agent is not started, the person hears why (not
// "something went wrong"), a CRITICAL entry is audited, and nothing half-made is attached.
// Needs root (mount); skipped otherwise.
(process.getuid?.() === 0 ? describe : describe.skip)('disk quota on a host disk that cannot hold it', () => {
  let small: Stack;
  let cramped: AgentManager;
  const reasons: unknown[] = [];

  beforeAll(async () => {
    small = await Stack.start({ plugins: ['echo'], config: { groups: { cramped: {} } } });
    const groups = join(small.dir, 'groups');
    mkdirSync(groups, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', groups]);
    const publish = small.core.publish.bind(small.core);
    small.core.publish = (topic, group, payload, ...rest) => {
      if (topic === 'agent.error') reasons.push(payload.reason);
      return publish(topic, group, payload, ...rest);
    };
    cramped = newAgentManager(small, { upstream: await standInUrl, apiKey: 'sk-test', agents: { run_timeout_ms: 60_000, disk_quota_mb: QUOTA_MB }, instance: `quota-full-${process.pid}`, groups: ['cramped'], runtime });
  }, 60_000);

  afterAll(async () => {
    await cramped?.stop();
    if (cramped?.storage instanceof LoopStorage) await cramped.storage.destroy('cramped', true).catch(() => undefined);
    try {
      execFileSync('umount', [join(small.dir, 'groups')]);
    } catch {
      // not mounted
    }
    await small?.stop();
  }, 60_000);

  it('refuses to start the agent, says why, audits it CRITICAL, and attaches nothing', async () => {
    await expect(cramped.enqueue('cramped', 'hello')).rejects.toThrow(/no room for the workspace of group "cramped"/);
    expect(reasons).toEqual([expect.stringContaining('the host\'s disk has no room for the workspace of group "cramped" at its quota')]);
    expect(small.core.audit.query({ group: 'cramped' }).some((e) => e.severity === 'CRITICAL' && e.code === 'NO_DISK_SPACE')).toBe(true);
    const image = join(small.dir, 'groups', 'cramped.img');
    const attached = execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).trim();
    expect(attached).toBe('');
  }, 60_000);
});
