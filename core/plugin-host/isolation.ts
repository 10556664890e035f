// What keeps plugins apart on the host: when the plugin host runs as root, each plugin's
// process runs as a uid of its own (kept in a small file, so it stays the same across
// restarts and never passes to another plugin), its data folder is its own (0700) and
// nothing else of the data volume is open to it; its environment holds no secret.
import { chmodSync, existsSync, lchownSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeAtomically } from '../src/state/atomic-write.js';
import { reportMigration } from '../src/state/format-migrations.js';
import { StoreTooNewError } from '../src/state/json-state.js';
import { formatVersion, versionedJsonText } from '../src/state/versioned-json.js';

/**
 * Plugin uids start here: far above the image's users (node is 1000) and Debian's. The
 * tests give each stack a range of its own: a uid is swept whole (endEverythingOf).
 */
const FIRST_UID = Number(process.env.CARAPACE_PLUGIN_FIRST_UID) || 20_001;
const UIDS_FILE = '.uids.json';

export type Ids = { uid: number; gid: number };

const UIDS_FORMAT = 1;

/**
 * Version 1 is `{version, uids}`; version 0 was the map alone, plugin name to uid (a plugin
 * may be named "version", but no uid is that small). A newer file is refused: uids must
 * never be handed out twice.
 */
function readUids(file: string): { uids: Record<string, number>; migrated: boolean } {
  const json = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown; uids?: unknown };
  const version = typeof json.version === 'number' && json.version < FIRST_UID ? formatVersion(json) : 0;
  if (version === 0) return { uids: json as Record<string, number>, migrated: true };
  if (version > UIDS_FORMAT) throw new StoreTooNewError(file, version, UIDS_FORMAT);
  return { uids: (json.uids ?? {}) as Record<string, number>, migrated: false };
}

/** Each plugin's uid, or null for all when the host is not root (it cannot switch users). */
export class PluginIds {
  private readonly map: Record<string, number>;
  private readonly file: string;

  constructor(root: string) {
    this.file = join(root, UIDS_FILE);
    const saved = existsSync(this.file) ? readUids(this.file) : { uids: {}, migrated: false };
    this.map = saved.uids;
    if (saved.migrated) {
      this.save();
      reportMigration({ file: this.file, from: 0, to: UIDS_FORMAT });
    }
  }

  static isolating(): boolean {
    return typeof process.getuid === 'function' && process.getuid() === 0;
  }

  idsFor(plugin: string): Ids | null {
    if (!PluginIds.isolating()) return null;
    let uid = Object.hasOwn(this.map, plugin) ? this.map[plugin] : undefined;
    if (uid === undefined) {
      uid = Math.max(FIRST_UID - 1, ...Object.values(this.map)) + 1;
      this.map[plugin] = uid;
      this.save();
    }
    return { uid, gid: uid };
  }

  private save(): void {
    writeAtomically(this.file, versionedJsonText(UIDS_FORMAT, { uids: this.map }, 2), 0o600);
  }
}

/**
 * The plugins' data root (traversable, not listable, by others) and one plugin's folder
 * in it, owned by the plugin (every file, in case an earlier run wrote them as another user).
 */
export function prepareDataDir(root: string, dir: string, ids: Ids | null): void {
  mkdirSync(root, { recursive: true });
  mkdirSync(dir, { recursive: true });
  if (!ids) return;
  chmodSync(root, 0o711);
  chownTree(dir, ids);
  chmodSync(dir, 0o700);
  // A folder above that others may not pass (made 0700 by hand or by a stray mkdir) locks
  // every plugin out of its own data: say which, rather than fail in each plugin later.
  for (let above = dirname(root); above !== dirname(above); above = dirname(above)) {
    if ((statSync(above).mode & 0o001) === 0) throw new Error(`${above} is closed to the plugins' users (mode ${(statSync(above).mode & 0o777).toString(8)}): allow others to pass (chmod o+x)`);
  }
}

function chownTree(path: string, ids: Ids): void {
  lchownSync(path, ids.uid, ids.gid);
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) chownTree(child, ids);
    else lchownSync(child, ids.uid, ids.gid);
  }
}

/** A plugin process's environment: nothing of the host's (which holds every plugin's secrets). */
export function pluginEnv(from: NodeJS.ProcessEnv, dataDir: string): NodeJS.ProcessEnv {
  // Temporary files (SQLite's too) in its own folder: the appliance gives it no other.
  const env: NodeJS.ProcessEnv = { HOME: dataDir, TMPDIR: dataDir, SQLITE_TMPDIR: dataDir, PATH: from.PATH ?? '/usr/local/bin:/usr/bin:/bin' };
  for (const name of ['NODE_ENV', 'TZ', 'LANG', 'LC_ALL'] as const) if (from[name] !== undefined) env[name] = from[name];
  return env;
}

/** Rounds of the sweep: a process forking as fast as it can is caught within a few. */
const SWEEP_ROUNDS = 50;

/**
 * Ends every process a plugin left (a detached grandchild, a double fork): each process of
 * its uid (its alone, when the host is root), else its process group. Runs until none is left.
 */
export async function endEverythingOf(ids: Ids | null, pid: number | undefined): Promise<void> {
  if (!ids) {
    if (pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
    return;
  }
  for (let round = 0; round < SWEEP_ROUNDS; round++) {
    const left = processesOf(ids.uid);
    if (left.length === 0) return;
    for (const p of left) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // ended meanwhile
      }
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Running processes whose real, effective or saved uid is `uid` (from /proc, as root sees it),
 * in this process's PID namespace only: a plugin host running outside a container (the
 * tests, a bench) must not reach into containers, whose plugins may have the same uids.
 */
export function processesOf(uid: number): number[] {
  const found: number[] = [];
  const ours = pidNamespace('self');
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || pidNamespace(entry) !== ours) continue;
    let status: string;
    try {
      status = readFileSync(`/proc/${entry}/status`, 'utf8');
    } catch {
      continue;
    }
    // A zombie has ended already; only its parent (or init) can take it away.
    if (/^State:\s+Z/m.test(status)) continue;
    const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    if (uids && uids.slice(1, 4).some((u) => Number(u) === uid)) found.push(Number(entry));
  }
  return found;
}

function pidNamespace(pid: string): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}
