// manifest.json, the first entry of every archive: what it holds, so that a restore can
// check every byte before it writes one. Format version, the Carapace that made it, when,
// and each file's path, size, sha256 and mode; each database's schema version
// (PRAGMA user_version). Paths are relative to the installation's volumes folder
// (config/, data/, logs/, groups/) or secrets/ (.env).
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { DAMAGED_FIX, fail } from './errors.js';

export const MANIFEST = 'manifest.json';
/** Format 1: this file's shape and the archive's layout. A newer one is refused (BACKUP_UNSUPPORTED). */
export const FORMAT_VERSION = 1;
/** A manifest larger than this is not one of ours. */
export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

export const AREAS = ['config', 'data', 'logs', 'groups', 'secrets'] as const;
export type Area = (typeof AREAS)[number];

export interface ManifestFile {
  path: string;
  size: number;
  sha256: string;
  mode: number;
  /** A database, copied with SQLite's backup API and checked. */
  sqlite?: { user_version: number };
}

export interface Skipped {
  path: string;
  reason: string;
}

export interface Manifest {
  format: number;
  carapace_version: string;
  created_at: string;
  /** Whether .env and the admin token are in it. */
  secrets: boolean;
  files: ManifestFile[];
  /** What was found and left out, and why (a damaged database, a link in a workspace). */
  skipped: Skipped[];
  /** Each group's workspace, and whether it was read from its ext4 image or a folder. */
  workspaces: { group: string; from: 'image' | 'folder' }[];
}

/** A file's size and sha256, read once. */
export function hashFile(file: string): Promise<{ size: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    let size = 0;
    createReadStream(file)
      .on('data', (chunk: Buffer | string) => {
        const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        size += bytes.length;
        hash.update(bytes);
      })
      .on('error', reject)
      .on('end', () => resolve({ size, sha256: hash.digest('hex') }));
  });
}

/** A path as an archive may hold it: under one of the areas, no empty, `.` or `..` part, no NUL. */
export function safePath(path: string): boolean {
  if (path.includes('\0') || path.startsWith('/') || path.length > 4096) return false;
  const parts = path.split('/');
  if (!(AREAS as readonly string[]).includes(parts[0]) || parts.length < 2) return false;
  return parts.every((p) => p !== '' && p !== '.' && p !== '..');
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** The manifest an archive carries, checked whole; anything else is BACKUP_DAMAGED (or BACKUP_UNSUPPORTED for a newer format). */
export function parseManifest(text: string, archive: string): Manifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    fail('BACKUP_DAMAGED', `${archive}: its manifest is not JSON`, DAMAGED_FIX);
  }
  const bad = (what: string): never => fail('BACKUP_DAMAGED', `${archive}: its manifest is damaged (${what})`, DAMAGED_FIX);
  if (!isObject(raw)) return bad('not an object');
  if (!isCount(raw.format)) return bad('no format version');
  if (raw.format > FORMAT_VERSION) {
    fail('BACKUP_UNSUPPORTED', `${archive} has backup format ${raw.format}, newer than the ${FORMAT_VERSION} this Carapace (${String(raw.carapace_version)}) reads`, `restore it with Carapace ${String(raw.carapace_version)} or newer`);
  }
  if (typeof raw.carapace_version !== 'string' || typeof raw.created_at !== 'string' || typeof raw.secrets !== 'boolean') return bad('version, time or secrets missing');
  if (!Array.isArray(raw.files) || !Array.isArray(raw.skipped) || !Array.isArray(raw.workspaces)) return bad('files, skipped or workspaces missing');
  const seen = new Set<string>();
  const files: ManifestFile[] = raw.files.map((f: unknown) => {
    if (!isObject(f) || typeof f.path !== 'string' || !safePath(f.path)) return bad(`a path it may not hold: ${JSON.stringify(isObject(f) ? f.path : f)}`);
    if (seen.has(f.path)) return bad(`${f.path} listed twice`);
    seen.add(f.path);
    if (!isCount(f.size) || typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256) || !isCount(f.mode) || f.mode > 0o7777) return bad(`${f.path}: size, checksum or mode`);
    const file: ManifestFile = { path: f.path, size: f.size, sha256: f.sha256, mode: f.mode };
    if (f.sqlite !== undefined) {
      if (!isObject(f.sqlite) || !isCount(f.sqlite.user_version)) return bad(`${f.path}: its schema version`);
      file.sqlite = { user_version: f.sqlite.user_version };
    }
    return file;
  });
  const skipped = raw.skipped.map((s: unknown) => (isObject(s) && typeof s.path === 'string' && typeof s.reason === 'string' ? { path: s.path, reason: s.reason } : bad('skipped')));
  const workspaces = raw.workspaces.map((w: unknown): Manifest['workspaces'][number] =>
    isObject(w) && typeof w.group === 'string' && (w.from === 'image' || w.from === 'folder') ? { group: w.group, from: w.from } : bad('workspaces'),
  );
  return { format: raw.format, carapace_version: raw.carapace_version, created_at: raw.created_at, secrets: raw.secrets, files, skipped, workspaces };
}
