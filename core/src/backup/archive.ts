// The archive file: a gzipped tar (npm `tar`), manifest.json first, optionally encrypted
// (encryption.ts). Written to a hidden partial file (mode 0600 from its first byte), synced,
// then renamed: a backup cut short leaves no file that looks like an archive. Read back as
// one stream that checks as it goes: the manifest first, then each entry against it (listed,
// once, its size, its sha256), and nothing written outside the staging folder it is given.
import { createHash, type Hash } from 'node:crypto';
import { closeSync, createReadStream, createWriteStream, fsyncSync, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { DAMAGED_FIX, fail } from './errors.js';
import { encryptingStream, isEncrypted, openEncrypted } from './encryption.js';
import { MANIFEST, MAX_MANIFEST_BYTES, parseManifest, type Manifest, type ManifestFile } from './manifest.js';

/** Writes `staging`'s manifest.json and `paths` (relative to it) as an archive at `partial`; its size. */
export async function writeArchive(staging: string, paths: readonly string[], partial: string, passphrase: string | undefined): Promise<number> {
  const pack = tar.c({ gzip: true, cwd: staging, portable: true, noDirRecurse: true, strict: true }, [MANIFEST, ...paths]);
  const out = createWriteStream(partial, { mode: 0o600, flags: 'wx' });
  let bytes = 0;
  const count = async function* (source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    for await (const chunk of source) {
      bytes += chunk.length;
      yield chunk;
    }
  };
  if (passphrase) await pipeline(pack, await encryptingStream(passphrase), count, out);
  else await pipeline(pack, count, out);
  const fd = openSync(partial, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return bytes;
}

export interface Extracted {
  manifest: Manifest;
  encrypted: boolean;
}

/** The first bytes of a file. */
function head(file: string, bytes: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    return buffer.subarray(0, readSync(fd, buffer, 0, bytes, 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * Extracts `archive` into `staging` (an empty folder), checking every entry against the
 * manifest: an entry it does not list, one listed twice or of another kind, a size or a
 * checksum that differs, a listed file that never comes, a truncated or altered stream are
 * all BACKUP_DAMAGED. Databases are not checked here (verify.ts does that on the copies).
 */
export async function extractArchive(archive: string, staging: string, passphrase: string | undefined): Promise<Extracted> {
  const start = head(archive, 16);
  const encrypted = isEncrypted(start);
  if (!encrypted && !(start[0] === 0x1f && start[1] === 0x8b)) fail('BACKUP_DAMAGED', `${archive} is not a Carapace backup (neither a gzipped tar nor an encrypted archive)`, DAMAGED_FIX);
  const opened = encrypted ? await openEncrypted(archive, passphrase) : null;
  const source = createReadStream(archive, { start: opened?.start ?? 0 });
  let problem: Error | null = null;
  const parser = new tar.Parser({ strict: true, maxDecompressionRatio: Infinity });
  const stop = (err: Error): void => {
    problem ??= err;
    parser.abort(err);
  };
  let manifest: Manifest | null = null;
  const listed = new Map<string, ManifestFile>();
  const seen = new Set<string>();

  parser.on('entry', (entry: tar.ReadEntry) => {
    try {
      if (!manifest) return readManifest(entry);
      if (entry.type !== 'File' && entry.type !== 'OldFile') fail('BACKUP_DAMAGED', `${archive} holds ${entry.path}, a ${entry.type} its manifest does not list`, DAMAGED_FIX);
      const want = listed.get(entry.path) ?? fail('BACKUP_DAMAGED', `${archive} holds ${entry.path}, which its manifest does not list`, DAMAGED_FIX);
      if (seen.has(entry.path)) fail('BACKUP_DAMAGED', `${archive} holds ${entry.path} twice`, DAMAGED_FIX);
      seen.add(entry.path);
      if (entry.size !== want.size) fail('BACKUP_DAMAGED', `${entry.path} is ${entry.size} bytes in ${archive}, its manifest says ${want.size}`, DAMAGED_FIX);
      writeEntry(entry, want);
    } catch (err) {
      entry.resume();
      stop(err as Error);
    }
  });

  function readManifest(entry: tar.ReadEntry): void {
    if (entry.path !== MANIFEST || entry.type !== 'File' || entry.size > MAX_MANIFEST_BYTES) fail('BACKUP_DAMAGED', `${archive} does not start with its manifest`, DAMAGED_FIX);
    const chunks: Buffer[] = [];
    entry.on('data', (c: Buffer) => chunks.push(c));
    entry.on('end', () => {
      try {
        const text = Buffer.concat(chunks).toString('utf8');
        manifest = parseManifest(text, archive);
        for (const f of manifest.files) listed.set(f.path, f);
        writeFileAt(join(staging, MANIFEST), text);
      } catch (err) {
        stop(err as Error);
      }
    });
  }

  function writeEntry(entry: tar.ReadEntry, want: ManifestFile): void {
    const target = join(staging, entry.path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    const fd = openSync(target, 'wx', 0o600);
    const hash: Hash = createHash('sha256');
    let open = true;
    const close = (): void => {
      if (open) closeSync(fd);
      open = false;
    };
    entry.on('data', (chunk: Buffer) => {
      if (!open || problem) return;
      try {
        writeSync(fd, chunk);
        hash.update(chunk);
      } catch (err) {
        close();
        stop(err as Error);
      }
    });
    entry.on('end', () => {
      if (!open) return;
      close();
      if (!problem && hash.digest('hex') !== want.sha256) stop(failure(`${entry.path} does not match its checksum in the manifest (altered or damaged)`));
    });
  }

  const done = new Promise<void>((resolve, reject) => {
    parser.on('error', (err: Error) => reject(problem ?? err));
    parser.on('end', () => resolve());
    parser.on('close', () => resolve());
  });
  done.catch(() => undefined);
  try {
    const input = opened ? source.pipe(opened.decrypting) : source;
    source.on('error', (err) => stop(err));
    opened?.decrypting.on('error', (err) => stop(err));
    for await (const chunk of input as AsyncIterable<Buffer>) {
      if (problem) break;
      if (!parser.write(chunk)) await Promise.race([once(parser, 'drain'), done]);
    }
    if (!problem) parser.end();
    await done;
  } catch (err) {
    problem ??= err as Error;
  }
  if (problem) throw asDamage(problem, archive);
  if (!manifest) fail('BACKUP_DAMAGED', `${archive} holds no manifest`, DAMAGED_FIX);
  const found: Manifest = manifest;
  const missing = found.files.filter((f) => !seen.has(f.path));
  if (missing.length > 0) fail('BACKUP_DAMAGED', `${archive} lacks ${missing.length} file(s) its manifest lists: ${missing.slice(0, 3).map((f) => f.path).join(', ')}`, DAMAGED_FIX);
  return { manifest: found, encrypted };
}

function failure(message: string): Error {
  try {
    fail('BACKUP_DAMAGED', message, DAMAGED_FIX);
  } catch (err) {
    return err as Error;
  }
}

/** A BackupFailure stays as it is; anything the tar or gzip layer threw is damage. */
function asDamage(err: Error, archive: string): Error {
  if (err.name === 'BackupFailure') return err;
  return failure(`${archive} cannot be read: ${err.message}`);
}

function writeFileAt(file: string, text: string): void {
  const fd = openSync(file, 'wx', 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
