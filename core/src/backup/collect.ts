// What goes into an archive, found by walking the installation's folders (never a list of
// names: a plugin added tomorrow is backed up too): config/, data/ (the core's files and
// every plugin's under data/plugins/), logs/ (the audit log, rotated files too) and each
// group's workspace in groups/. Databases are told by their first bytes, not their names.
import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { join, relative } from 'node:path';
import { ADMIN_TOKEN_FILE } from '../console/admin-token.js';
import type { Skipped } from './manifest.js';
import { isSqliteFile } from './sqlite-copy.js';

/** The installation's folders, as this process sees them. */
export interface VolumePaths {
  config: string;
  data: string;
  logs: string;
  groups: string;
}

export interface Item {
  kind: 'sqlite' | 'file';
  source: string;
  /** Its path in the archive: `<area>/<path in the folder>`. */
  path: string;
  mode: number;
}

export interface WorkspaceSource {
  group: string;
  kind: 'image' | 'folder';
  /** The image file, or the folder. */
  source: string;
  /** Its folder in the archive: groups/<name>. */
  path: string;
}

export interface Collected {
  items: Item[];
  workspaces: WorkspaceSource[];
  skipped: Skipped[];
}

/** The core's and the plugins' group names (storage.ts, memory's databases.ts). */
const GROUP = /^[a-zA-Z0-9_-]{1,64}$/;
/** Part of a database beside it, copied with it by the backup API. */
const SIDECAR = /-(wal|shm|journal)$/;
/** writeAtomically's temp file (<file>.<pid>.tmp): a write in progress, not state. */
const TEMP = /\.\d+\.tmp$/;
/** A damaged file set aside (json-state.ts asideName): kept on the machine for a person, not restored. */
const ASIDE = /\.corrupt-\d{4}-/;

export const mode = (stat: Stats): number => stat.mode & 0o7777;

/**
 * Every regular file under `dir`, depth first; links and other kinds are left out and
 * said. `exclude`: folders not to walk into (the backups folder, if it is under one).
 */
export function walkFiles(dir: string, exclude: readonly string[] = []): { files: { path: string; stat: Stats }[]; others: string[] } {
  const files: { path: string; stat: Stats }[] = [];
  const others: string[] = [];
  const stack = [dir];
  while (stack.length > 0) {
    const current = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(current).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    for (const name of names.reverse()) {
      const path = join(current, name);
      if (exclude.includes(path)) continue;
      let stat: Stats;
      try {
        stat = lstatSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // gone meanwhile (a temp file renamed)
        throw err;
      }
      if (stat.isDirectory()) stack.push(path);
      else if (stat.isFile()) files.push({ path, stat });
      else others.push(path);
    }
  }
  return { files, others };
}

function area(name: 'config' | 'data' | 'logs', dir: string, secrets: boolean, exclude: readonly string[], out: Collected): void {
  const { files, others } = walkFiles(dir, exclude);
  const present = new Set(files.map((f) => f.path));
  for (const other of others) out.skipped.push({ path: `${name}/${relative(dir, other)}`, reason: 'not a regular file (a link, a socket)' });
  for (const { path, stat } of files) {
    const rel = relative(dir, path);
    const archived = `${name}/${rel}`;
    if (TEMP.test(rel)) continue;
    if (SIDECAR.test(rel) && present.has(path.replace(SIDECAR, ''))) continue;
    if (ASIDE.test(rel)) {
      out.skipped.push({ path: archived, reason: 'a damaged file set aside earlier (kept on the machine, not restored)' });
      continue;
    }
    if (name === 'data' && rel === ADMIN_TOKEN_FILE && !secrets) continue;
    const sqlite = name !== 'logs' && isSqliteFile(path);
    out.items.push({ kind: sqlite ? 'sqlite' : 'file', source: path, path: archived, mode: mode(stat) });
  }
}

/**
 * The workspaces in groups/: `<group>.img` (an ext4 image, read through Docker) or a folder
 * `<group>/` (no quota, or from before quotas); both become `groups/<group>/` in the archive,
 * a folder the next attach seeds a new image from. A folder beside its group's image (a
 * migration a crash cut short) is kept as `<group>.pre-quota`, which the attach would name it.
 */
function workspaces(dir: string, out: Collected): void {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const images = new Set(names.filter((n) => n.endsWith('.img') && GROUP.test(n.slice(0, -4))).map((n) => n.slice(0, -4)));
  for (const name of names) {
    const path = join(dir, name);
    const stat = lstatSync(path);
    if (stat.isFile() && name.endsWith('.img') && images.has(name.slice(0, -4))) {
      out.workspaces.push({ group: name.slice(0, -4), kind: 'image', source: path, path: `groups/${name.slice(0, -4)}` });
    } else if (stat.isDirectory()) {
      const archived = images.has(name) ? `groups/${name}.pre-quota` : `groups/${name}`;
      out.workspaces.push({ group: name, kind: 'folder', source: path, path: archived });
    } else if (stat.isFile() && !name.endsWith('.img.new')) {
      out.items.push({ kind: 'file', source: path, path: `groups/${name}`, mode: mode(stat) });
    } else if (!stat.isFile()) {
      out.skipped.push({ path: `groups/${name}`, reason: 'not a regular file or folder' });
    }
  }
}

export function collect(volumes: VolumePaths, options: { secrets: boolean; exclude?: readonly string[] }): Collected {
  const out: Collected = { items: [], workspaces: [], skipped: [] };
  const exclude = options.exclude ?? [];
  area('config', volumes.config, options.secrets, exclude, out);
  area('data', volumes.data, options.secrets, exclude, out);
  area('logs', volumes.logs, options.secrets, exclude, out);
  workspaces(volumes.groups, out);
  return out;
}
