// An archive encrypted with a passphrase (CARAPACE_BACKUP_PASSPHRASE in .env): scrypt makes
// the key from it and a random salt, AES-256-GCM seals the archive in chunks of 64 KiB,
// each with its own tag, so that it is read as a stream and every byte is checked before
// it is used. Each chunk's additional data binds it to the header, its place and whether it
// is the last: a chunk moved, dropped, repeated or cut off is refused, like a flipped byte.
// The header carries a check value made with a second key from the same passphrase: a wrong
// passphrase is told apart from damage before anything is decrypted.
//
//   header:  "CARAPACEENC1" | logN r p 0 (u8 each) | salt (16) | chunk size (u32 BE) | check (32)
//   record:  flags (u8: 1 = last) | length (u32 BE) | ciphertext (length) | GCM tag (16)
//   nonce of record i: 4 zero bytes | i (u64 BE); unique, since each archive has its own key.
import { createCipheriv, createDecipheriv, createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { open } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import { DAMAGED_FIX, fail } from './errors.js';

const MAGIC = Buffer.from('CARAPACEENC1', 'ascii');
const HEADER_BYTES = MAGIC.length + 4 + 16 + 4 + 32;
const CHUNK = 64 * 1024;
const TAG = 16;
const RECORD_HEAD = 5;
const LAST = 1;
/** scrypt: N = 2^16, r = 8 (64 MiB, a fraction of a second); what a header may ask for is bounded. */
const COST = { logN: 16, r: 8, p: 1 };
export const MIN_PASSPHRASE = 8;

export function isEncrypted(start: Buffer): boolean {
  return start.length >= MAGIC.length && start.subarray(0, MAGIC.length).equals(MAGIC);
}

interface Keys {
  cipher: Buffer;
  check: Buffer;
}

function deriveKeys(passphrase: string, salt: Buffer, cost: { logN: number; r: number; p: number }): Promise<Keys> {
  return new Promise((resolve, reject) => {
    const N = 2 ** cost.logN;
    scrypt(passphrase.normalize('NFC'), salt, 64, { N, r: cost.r, p: cost.p, maxmem: 256 * N * cost.r + 1024 * 1024 }, (err, key) => {
      if (err) reject(err);
      else resolve({ cipher: key.subarray(0, 32), check: key.subarray(32, 64) });
    });
  });
}

const checkValue = (keys: Keys, head: Buffer): Buffer => createHmac('sha256', keys.check).update(head).digest();

function nonce(index: bigint): Buffer {
  const iv = Buffer.alloc(12);
  iv.writeBigUInt64BE(index, 4);
  return iv;
}

function additionalData(header: Buffer, index: bigint, flags: number): Buffer {
  const tail = Buffer.alloc(9);
  tail.writeBigUInt64BE(index, 0);
  tail[8] = flags;
  return Buffer.concat([header, tail]);
}

/** A stream that encrypts what goes through it, header first. */
export async function encryptingStream(passphrase: string): Promise<Transform> {
  const salt = randomBytes(16);
  const keys = await deriveKeys(passphrase, salt, COST);
  const head = Buffer.alloc(HEADER_BYTES - 32);
  MAGIC.copy(head, 0);
  head.writeUInt8(COST.logN, MAGIC.length);
  head.writeUInt8(COST.r, MAGIC.length + 1);
  head.writeUInt8(COST.p, MAGIC.length + 2);
  salt.copy(head, MAGIC.length + 4);
  head.writeUInt32BE(CHUNK, MAGIC.length + 20);
  const header = Buffer.concat([head, checkValue(keys, head)]);
  let index = 0n;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const seal = (plain: Buffer, flags: number): Buffer => {
    const cipher = createCipheriv('aes-256-gcm', keys.cipher, nonce(index));
    cipher.setAAD(additionalData(header, index, flags));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    index++;
    const recordHead = Buffer.alloc(RECORD_HEAD);
    recordHead[0] = flags;
    recordHead.writeUInt32BE(body.length, 1);
    return Buffer.concat([recordHead, body, cipher.getAuthTag()]);
  };
  let started = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      if (!started) {
        this.push(header);
        started = true;
      }
      pending.push(chunk);
      pendingBytes += chunk.length;
      // Only whole chunks with more to come: the last one is sealed as such at the end.
      if (pendingBytes > CHUNK) {
        let all = Buffer.concat(pending);
        while (all.length > CHUNK) {
          this.push(seal(all.subarray(0, CHUNK), 0));
          all = all.subarray(CHUNK);
        }
        pending = [all];
        pendingBytes = all.length;
      }
      done();
    },
    flush(done: TransformCallback) {
      if (!started) this.push(header);
      this.push(seal(Buffer.concat(pending), LAST));
      done();
    },
  });
}

/**
 * Opens an encrypted archive: reads and checks its header with the passphrase (a wrong one:
 * BACKUP_WRONG_PASSPHRASE), and gives the offset its records start at and a stream that
 * decrypts them, failing with BACKUP_DAMAGED on any record that does not authenticate, and
 * on an archive that ends before its last record.
 */
export async function openEncrypted(file: string, passphrase: string | undefined): Promise<{ start: number; decrypting: Transform }> {
  if (!passphrase) fail('BACKUP_PASSPHRASE_NEEDED', `${file} is encrypted and no passphrase was given`, 'set CARAPACE_BACKUP_PASSPHRASE in .env to the passphrase it was made with');
  const handle = await open(file, 'r');
  const header = Buffer.alloc(HEADER_BYTES);
  try {
    const { bytesRead } = await handle.read(header, 0, HEADER_BYTES, 0);
    if (bytesRead < HEADER_BYTES) fail('BACKUP_DAMAGED', `${file} ends inside its encryption header`, DAMAGED_FIX);
  } finally {
    await handle.close();
  }
  const at = MAGIC.length;
  const cost = { logN: header[at], r: header[at + 1], p: header[at + 2] };
  const chunk = header.readUInt32BE(at + 20);
  if (cost.logN < 10 || cost.logN > 20 || cost.r < 1 || cost.r > 32 || cost.p < 1 || cost.p > 4 || chunk < 1024 || chunk > 16 * 1024 * 1024) {
    fail('BACKUP_DAMAGED', `${file}: its encryption header is damaged (impossible parameters)`, DAMAGED_FIX);
  }
  const keys = await deriveKeys(passphrase, header.subarray(at + 4, at + 20), cost);
  const head = header.subarray(0, HEADER_BYTES - 32);
  if (!timingSafeEqual(checkValue(keys, head), header.subarray(HEADER_BYTES - 32))) {
    fail('BACKUP_WRONG_PASSPHRASE', `the passphrase does not open ${file} (or its header is damaged)`, 'set CARAPACE_BACKUP_PASSPHRASE in .env to the passphrase the archive was made with');
  }
  return { start: HEADER_BYTES, decrypting: decryptingStream(keys, header, chunk, file) };
}

function decryptingStream(keys: Keys, header: Buffer, chunk: number, file: string): Transform {
  let buffered: Buffer = Buffer.alloc(0);
  let index = 0n;
  let ended = false;
  const damaged = (what: string): Error => {
    try {
      fail('BACKUP_DAMAGED', `${file}: ${what}`, DAMAGED_FIX);
    } catch (err) {
      return err as Error;
    }
  };
  return new Transform({
    transform(data: Buffer, _encoding, done: TransformCallback) {
      buffered = buffered.length === 0 ? data : Buffer.concat([buffered, data]);
      while (buffered.length >= RECORD_HEAD) {
        if (ended) return done(damaged('bytes after its last encrypted chunk'));
        const flags = buffered[0];
        const length = buffered.readUInt32BE(1);
        if ((flags & ~LAST) !== 0 || length > chunk) return done(damaged(`encrypted chunk ${index} is damaged`));
        const size = RECORD_HEAD + length + TAG;
        if (buffered.length < size) break;
        const decipher = createDecipheriv('aes-256-gcm', keys.cipher, nonce(index));
        decipher.setAAD(additionalData(header, index, flags));
        decipher.setAuthTag(buffered.subarray(size - TAG, size));
        let plain: Buffer;
        try {
          plain = Buffer.concat([decipher.update(buffered.subarray(RECORD_HEAD, size - TAG)), decipher.final()]);
        } catch {
          return done(damaged(`encrypted chunk ${index} does not authenticate (altered or damaged)`));
        }
        index++;
        if (flags & LAST) ended = true;
        buffered = buffered.subarray(size);
        this.push(plain);
      }
      done();
    },
    flush(done: TransformCallback) {
      if (!ended || buffered.length > 0) return done(damaged(ended ? 'bytes after its last encrypted chunk' : 'it ends before its last encrypted chunk (truncated)'));
      done();
    },
  });
}
