// The archive's encryption on its own (the tar and gzip layers would catch some of this
// anyway): several chunks round trip; a chunk dropped at a chunk boundary (the last, so that
// what is left still decrypts), two chunks swapped, a flipped byte and a wrong passphrase are
// each refused with their code.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { encryptingStream, openEncrypted } from '../../src/backup/encryption.js';
import type { BackupFailure } from '../../src/backup/errors.js';

const PASSPHRASE = 'the encryption unit test passphrase';
const HEADER = 12 + 4 + 16 + 4 + 32;
const RECORD = 5 + 64 * 1024 + 16;
let dir: string;
let plain: Buffer;
let sealed: Buffer;

async function seal(data: Buffer): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(Readable.from([data.subarray(0, 1000), data.subarray(1000)]), await encryptingStream(PASSPHRASE), async function* (source: AsyncIterable<Buffer>) {
    for await (const c of source) chunks.push(c);
  });
  return Buffer.concat(chunks);
}

/** Decrypts `bytes` (as a file); its plaintext, or the code it was refused with. */
async function open(bytes: Buffer, passphrase = PASSPHRASE): Promise<Buffer | string> {
  const file = join(dir, `a-${Math.random()}`);
  writeFileSync(file, bytes);
  try {
    const { start, decrypting } = await openEncrypted(file, passphrase);
    const out: Buffer[] = [];
    await pipeline(createReadStream(file, { start }), decrypting, async function* (source: AsyncIterable<Buffer>) {
      for await (const c of source) out.push(c);
    });
    return Buffer.concat(out);
  } catch (err) {
    return (err as BackupFailure).problem?.code ?? (err as Error).message;
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-backup-enc-'));
  plain = randomBytes(3 * 64 * 1024 + 123); // three whole chunks and a last, short one
  sealed = await seal(plain);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('archive encryption', () => {
  it('round trips across chunks, and is not the plaintext', async () => {
    expect(sealed.length).toBe(HEADER + 3 * RECORD + 5 + 123 + 16);
    expect(sealed.includes(plain.subarray(0, 64))).toBe(false);
    expect(await open(sealed)).toEqual(plain);
  });

  it('refuses a wrong passphrase before decrypting anything', async () => {
    expect(await open(sealed, 'not the passphrase')).toBe('BACKUP_WRONG_PASSPHRASE');
  });

  it('refuses an archive whose last chunk was cut off at a chunk boundary (what is left decrypts)', async () => {
    expect(await open(sealed.subarray(0, HEADER + 3 * RECORD))).toBe('BACKUP_DAMAGED');
  });

  it('refuses two chunks swapped, and one flipped byte', async () => {
    const swapped = Buffer.concat([sealed.subarray(0, HEADER), sealed.subarray(HEADER + RECORD, HEADER + 2 * RECORD), sealed.subarray(HEADER, HEADER + RECORD), sealed.subarray(HEADER + 2 * RECORD)]);
    expect(await open(swapped)).toBe('BACKUP_DAMAGED');
    const flipped = Buffer.from(sealed);
    flipped[HEADER + RECORD + 100] ^= 1;
    expect(await open(flipped)).toBe('BACKUP_DAMAGED');
    const marked = Buffer.from(sealed);
    marked[HEADER] |= 1; // the first chunk claims to be the last
    expect(await open(marked)).toBe('BACKUP_DAMAGED');
  });

  it('refuses bytes after the last chunk', async () => {
    expect(await open(Buffer.concat([sealed, Buffer.from('trailing bytes')]))).toBe('BACKUP_DAMAGED');
  });
});
