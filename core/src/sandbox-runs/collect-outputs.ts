// What a run leaves in /out, taken through the engine's archive API (nothing runs in the
// sandbox for it: the engine reads the /out volume from the host side) and checked entry by
// entry as the tar is read: regular files only (a link, device or fifo is refused and
// reported, never followed), names checked (output-names.ts), at most MAX_FILES files and
// MAX_BYTES in all, at most MAX_ENTRIES entries looked at, within COLLECT_MS. The core
// holds at most MAX_BYTES of it.
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { OUT_DIR } from './container-spec.js';
import { refuseName, showName } from './output-names.js';

export const MAX_FILES = 50;
export const MAX_BYTES = 32 * 1024 * 1024;
/** Entries of /out looked at; the rest are refused unseen. */
export const MAX_ENTRIES = 2000;
/** Refusals named one by one; the others are counted. */
export const MAX_REFUSALS_NAMED = 20;
const COLLECT_MS = 20_000;

export interface OutputFile {
  /** Relative to /out, checked. */
  name: string;
  bytes: Buffer;
}

export interface RefusedOutput {
  /** As a person may be shown it (escaped, bounded). */
  name: string;
  reason: string;
}

export interface Collected {
  files: OutputFile[];
  /** The first MAX_REFUSALS_NAMED refusals. */
  refused: RefusedOutput[];
  /** All of them. */
  refusedCount: number;
}

/** An archive entry's path inside /out ("" for /out itself): the engine names entries after the folder asked for. */
function inside(entryName: string): string {
  const root = OUT_DIR.slice(1);
  const name = entryName.replace(/\/+$/, '');
  return name === root ? '' : name.startsWith(`${root}/`) ? name.slice(root.length + 1) : name;
}

class Tally {
  readonly collected: Collected = { files: [], refused: [], refusedCount: 0 };
  bytes = 0;
  refuse(name: string, reason: string): void {
    this.collected.refusedCount++;
    if (this.collected.refused.length < MAX_REFUSALS_NAMED) this.collected.refused.push({ name: showName(name), reason });
  }
}

async function read(entry: AsyncIterable<Buffer>, size: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let got = 0;
  for await (const chunk of entry) {
    got += chunk.length;
    if (got > size) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Whether /out is empty, from the engine's stat of it (a HEAD on the archive API, ~1 ms
 * against ~50 ms for the archive itself): /out is a tmpfs, and tmpfs gives a folder 20
 * bytes of size per entry, "." and ".." included, so an empty one is 40. Any other answer,
 * or none, means "look".
 */
export async function outIsEmpty(docker: Docker, id: string): Promise<boolean> {
  try {
    const res = (await docker.getContainer(id).infoArchive({ path: OUT_DIR })) as { headers?: Record<string, string | undefined> };
    const stat = res.headers?.['x-docker-container-path-stat'];
    return stat !== undefined && (JSON.parse(Buffer.from(stat, 'base64').toString('utf8')) as { size?: number }).size === 40;
  } catch {
    return false;
  }
}

export async function collectOutputs(docker: Docker, id: string): Promise<Collected> {
  const tally = new Tally();
  if (await outIsEmpty(docker, id)) return tally.collected;
  let archive: NodeJS.ReadableStream;
  try {
    archive = (await docker.getContainer(id).getArchive({ path: OUT_DIR })) as NodeJS.ReadableStream;
  } catch (err) {
    tally.refuse(OUT_DIR, `could not be read from the sandbox (${(err as Error).message})`);
    return tally.collected;
  }
  const extract = tar.extract();
  archive.pipe(extract);
  const timer = setTimeout(() => extract.destroy(new Error(`not read within ${COLLECT_MS / 1000} s`)), COLLECT_MS);
  let seen = 0;
  try {
    for await (const entry of extract) {
      const { type, size = 0, linkname } = entry.header;
      const name = inside(entry.header.name);
      if (name === '' || type === 'directory') {
        entry.resume();
        continue;
      }
      if (++seen > MAX_ENTRIES) {
        tally.refuse('…', `/out holds more than ${MAX_ENTRIES} entries: the rest were not looked at`);
        break;
      }
      const refusal =
        type !== 'file' ? `a ${type}${linkname ? ` to ${showName(linkname)}` : ''}: only regular files come back (never followed)` :
        refuseName(name) ?? (tally.collected.files.length >= MAX_FILES ? `more than ${MAX_FILES} files: only the first ${MAX_FILES} come back` :
        tally.bytes + size > MAX_BYTES ? `would pass ${MAX_BYTES / 1024 / 1024} MB in all` : null);
      if (refusal) {
        tally.refuse(name, refusal);
        entry.resume();
        continue;
      }
      const bytes = await read(entry as AsyncIterable<Buffer>, size);
      if (bytes === null) {
        tally.refuse(name, 'changed while it was read');
        continue;
      }
      tally.bytes += bytes.length;
      tally.collected.files.push({ name, bytes });
    }
  } catch (err) {
    tally.refuse(OUT_DIR, `could not be read to the end (${(err as Error).message})`);
  } finally {
    clearTimeout(timer);
    extract.destroy();
    (archive as NodeJS.ReadableStream & { destroy?(): void }).destroy?.();
  }
  return tally.collected;
}
