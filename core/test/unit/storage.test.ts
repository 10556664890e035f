// The disk quota's pure parts: image sizes, the helper's answer, when a volume is stale,
// and which storage the settings choose.
import { describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config.js';
import { allocatedBytes, BindStorage, engineOf, groupStorage, imageBytes, LoopStorage, parseDevices, treeBytes, volumeMatches, volumeName, WatchdogStorage, VOLUME_OPTIONS } from '../../src/agents/storage.js';

const MiB = 1024 * 1024;
const paths = { groupsDir: '/g', instance: 'i' };

describe('imageBytes', () => {
  it('is the quota for a new group, or a small old workspace', () => {
    expect(imageBytes(2048, 0)).toBe(2048 * MiB);
    expect(imageBytes(32, 1000)).toBe(32 * MiB);
  });
  it('grows to fit an old workspace larger than the quota, so nothing is lost', () => {
    const size = imageBytes(32, 100 * MiB);
    expect(size).toBeGreaterThanOrEqual(125 * MiB);
    expect(size % MiB).toBe(0);
  });
});

describe('parseDevices', () => {
  it('takes one loop device per image', () => {
    expect(parseDevices('/dev/loop3\n/dev/loop12\n', 2)).toEqual(['/dev/loop3', '/dev/loop12']);
  });
  it('refuses anything else, naming what it got', () => {
    expect(() => parseDevices('/dev/loop3\n', 2)).toThrow(/expected 2 loop device/);
    expect(() => parseDevices('/dev/sda\n/dev/loop1', 2)).toThrow(/sda/);
    expect(() => parseDevices('', 1)).toThrow();
  });
});

describe('volumeMatches', () => {
  it('reuses a volume only when it mounts the same device as ext4 with today\'s options (a reboot renumbers loop devices; discard is gone)', () => {
    expect(volumeMatches({ type: 'ext4', device: '/dev/loop1', o: VOLUME_OPTIONS }, '/dev/loop1')).toBe(true);
    expect(volumeMatches({ type: 'ext4', device: '/dev/loop1', o: 'nosuid,nodev,discard' }, '/dev/loop1')).toBe(false);
    expect(volumeMatches({ type: 'ext4', device: '/dev/loop1' }, '/dev/loop10')).toBe(false);
    expect(volumeMatches({ type: 'tmpfs', device: '/dev/loop1' }, '/dev/loop1')).toBe(false);
    expect(volumeMatches(null, '/dev/loop1')).toBe(false);
  });
  it('names volumes per instance and group', () => {
    expect(volumeName('carapace', 'main')).toBe('carapace-carapace-main-workspace');
  });
});

describe('groupStorage', () => {
  const settings = parseConfig({}).agents;
  it('defaults to a 2 GiB workspace quota and a 256 MiB state tmpfs', () => {
    expect(settings.disk_quota_mb).toBe(2048);
    expect(settings.state_quota_mb).toBe(256);
    expect(() => parseConfig({ agents: { disk_quota_mb: 5 } })).toThrow();
    expect(parseConfig({ agents: { disk_quota_mb: 0 } }).agents.disk_quota_mb).toBe(0);
  });
  it('holds the quota with loop devices when there is an engine, a watchdog if asked or without one, none at 0', () => {
    const engine = { docker: {} as never, hostPath: async (p: string) => p };
    expect(settings.disk_quota_mode).toBe('loop');
    expect(groupStorage(settings, paths, engine).mode).toBe('loop');
    expect(groupStorage({ ...settings, disk_quota_mode: 'watchdog' }, paths, engine).mode).toBe('watchdog');
    expect(groupStorage(settings, paths, null)).toBeInstanceOf(WatchdogStorage);
    expect(groupStorage({ ...settings, disk_quota_mb: 0 }, paths, engine).mode).toBe('off');
    expect(groupStorage({ ...settings, disk_quota_mb: 0 }, paths, engine)).toBeInstanceOf(BindStorage);
    expect(engineOf({})).toBeNull();
    expect(engineOf(engine)).toBe(engine);
  });
  it('seeds a new image from the old folder, and never once the image exists', () => {
    const dir = mkdtempSync(join(tmpdir(), 'storage-'));
    try {
      mkdirSync(join(dir, 'groups', 'main', 'a'), { recursive: true });
      writeFileSync(join(dir, 'groups', 'main', 'a', 'f'), Buffer.alloc(3000));
      expect(treeBytes(join(dir, 'groups', 'main'))).toBe(3000);
      const storage = new LoopStorage({ docker: {} as never, hostPath: async (p) => p }, { groupsDir: join(dir, 'groups'), instance: 'i' }, settings);
      const plans = storage.plans('main');
      expect(plans).toHaveLength(1);
      expect(plans[0]).toMatchObject({ image: join(dir, 'groups', 'main.img'), seed: join(dir, 'groups', 'main'), bytes: 2048 * MiB, target: '/workspace/group' });
      writeFileSync(join(dir, 'groups', 'main.img'), '');
      expect(storage.plans('main')[0]!.seed).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('WatchdogStorage', () => {
  it('counts allocated bytes (a fallocated or written file), and reports a group past its quota once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'storage-'));
    try {
      const storage = new WatchdogStorage({ groupsDir: join(dir, 'groups'), instance: 'i' }, { disk_quota_mb: 32 }, 10);
      const mounts = await storage.mounts('g');
      expect(mounts.map((m) => [m.source, m.target])).toEqual([[join(dir, 'groups', 'g'), '/workspace/group']]);
      writeFileSync(join(dir, 'groups', 'g', 'small'), Buffer.alloc(MiB));
      expect(allocatedBytes(join(dir, 'groups'))).toBeGreaterThanOrEqual(MiB);
      const calls: number[] = [];
      const over = new Promise<void>((resolve) => {
        storage.watch('g', (used, quota) => {
          calls.push(used);
          expect(quota).toBe(32 * MiB);
          resolve();
        });
      });
      writeFileSync(join(dir, 'groups', 'g', 'big'), Buffer.alloc(33 * MiB, 1));
      await over;
      await new Promise((r) => setTimeout(r, 50));
      expect(calls).toHaveLength(1);
      expect(calls[0]).toBeGreaterThan(32 * MiB);
      await expect(storage.mounts('g')).rejects.toThrow(/over its quota of 32 MB/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
