// What the workspaces may still take from the disk that holds them: every image is
// allocated in full when it is made, so only the groups whose image does not exist yet
// can still claim space (their quota each). Shown next to the disk's free space (doctor,
// Overview), so a person sees that the next new group will not fit before it fails.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export function unclaimedBytes(groupsDir: string, groups: readonly string[], settings: { disk_quota_mb: number; disk_quota_mode: 'loop' | 'watchdog' }): number {
  // Watchdog mode and no quota make no image: nothing is set aside ahead.
  if (settings.disk_quota_mode !== 'loop' || settings.disk_quota_mb === 0) return 0;
  const missing = groups.filter((group) => !existsSync(join(groupsDir, `${group}.img`)));
  return missing.length * settings.disk_quota_mb * 2 ** 20;
}
