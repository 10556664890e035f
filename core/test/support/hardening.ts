// What every agent container must look like in docker inspect, whatever its mode.
import { expect } from '@jest/globals';
import type Docker from 'dockerode';

/**
 * The spec's Container Mounts table: destination → writable. (~/.claude itself is a tmpfs
 * of the container: Claude Code's state, gone with it.)
 */
const SPEC_MOUNTS: Record<string, boolean> = {
  '/run/carapace': false,
  '/workspace/group': true,
  '/home/node/.claude/settings.json': false,
  '/home/node/.claude/CLAUDE.md': false,
  '/home/node/.claude/skills': false,
};

export function expectLockedDown(info: Docker.ContainerInspectInfo): void {
  const host = info.HostConfig;
  expect(info.Config.User).toBe('1000:1000');
  expect(host.ReadonlyRootfs).toBe(true);
  expect(host.CapDrop).toEqual(['ALL']);
  expect(host.CapAdd ?? []).toEqual([]);
  expect(host.Privileged).toBe(false);
  expect(host.SecurityOpt).toContain('no-new-privileges');
  expect(host.PidsLimit).toBeGreaterThan(0);
  expect(host.Memory).toBeGreaterThan(0);
  expect(host.NanoCpus).toBeGreaterThan(0);
  expect(Object.keys(host.Tmpfs ?? {}).sort()).toEqual(['/home/node/.claude', '/tmp']);
  for (const options of Object.values(host.Tmpfs ?? {})) expect(options).toMatch(/(^|,)size=\d+m(,|$)/);
}

/** Exactly these mounts (the spec's plus `extra`), and never the Docker socket. */
export function expectMounts(info: Docker.ContainerInspectInfo, extra: Record<string, boolean> = {}): void {
  const mounts = Object.fromEntries(info.Mounts.map((m) => [m.Destination, m.RW]));
  expect(mounts).toEqual({ ...SPEC_MOUNTS, ...extra });
  expect(info.Mounts.some((m) => m.Source.includes('docker.sock'))).toBe(false);
}
