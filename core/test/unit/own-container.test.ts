// Whether the core runs in a container, and which: only the engine's bind mounts of
// /etc/hostname, /etc/hosts and /etc/resolv.conf say so. A host running containers has
// their folders mounted too (seen in CI: a core on the host took itself for one of them
// and refused to start agents).
import { describe, expect, it } from '@jest/globals';
import { ownContainerId } from '../../src/agents/docker-runtime.js';

const ID = '0063a2b9dc01db806652d65cd946d277a018bb3513de62946aa5942654fcc049';
const OTHER = 'f'.repeat(64);
// As a container's mountinfo has them (captured from one on the test machine).
const INSIDE = [
  `94 77 254:0 /var/lib/docker/containers/${ID}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw`,
  `95 77 254:0 /var/lib/docker/containers/${ID}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw`,
  `96 77 254:0 /var/lib/docker/containers/${ID}/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw`,
].join('\n');
// A host's: another container's shm and a runtime's mount under its folder.
const HOST = [
  '22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
  `301 22 0:52 / /var/lib/docker/containers/${OTHER}/mounts/shm rw,nosuid shared:160 - tmpfs shm rw,size=65536k`,
].join('\n');

describe('ownContainerId', () => {
  it('names the container whose /etc files the engine mounted', () => {
    expect(ownContainerId(INSIDE)).toBe(ID);
    expect(ownContainerId(`${HOST}\n${INSIDE}`)).toBe(ID);
  });

  it('on a host, other containers\' folders in mountinfo name no container', () => {
    expect(ownContainerId(HOST)).toBeNull();
  });
});
