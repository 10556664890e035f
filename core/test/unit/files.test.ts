// What the core accepts as a file for a person (by its bytes), where an agent may point,
// and how many the core keeps.
import { describe, expect, it } from '@jest/globals';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { workspacePath } from '../../src/files/attach-files.js';
import { FileStore } from '../../src/files/file-store.js';
import { fileKind } from '../../src/files/file-type.js';

describe('fileKind', () => {
  it('knows images, PDF and text by their bytes, whatever the name says', () => {
    expect(fileKind(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]))).toEqual({ type: 'image/png', inline: true });
    expect(fileKind(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))?.type).toBe('image/jpeg');
    expect(fileKind(Buffer.from('GIF89a'))?.type).toBe('image/gif');
    expect(fileKind(Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 ')]))?.type).toBe('image/webp');
    expect(fileKind(Buffer.from('%PDF-1.7\n'))).toEqual({ type: 'application/pdf', inline: false });
    expect(fileKind(Buffer.from('Einkaufsliste: Milch, Eier — 2 €\n'))).toEqual({ type: 'text/plain; charset=utf-8', inline: false });
  });

  it('refuses what a person should not open from an agent: programs, archives, binary junk, broken UTF-8', () => {
    expect(fileKind(Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]))).toBeNull(); // ELF
    expect(fileKind(Buffer.from([0x50, 0x4b, 0x03, 0x04]))).toBeNull(); // zip
    expect(fileKind(Buffer.from('RIFF\0\0\0\0WAVEfmt '))).toBeNull();
    expect(fileKind(Buffer.from([0x68, 0x69, 0xc3]))).toBeNull(); // cut UTF-8
    expect(fileKind(Buffer.from('text with a \u001b[31m terminal escape'))).toBeNull();
  });
});

describe('workspacePath', () => {
  it('keeps a path inside /workspace/group and refuses every way out', () => {
    expect(workspacePath('a/b.png')).toBe('/workspace/group/a/b.png');
    expect(workspacePath('/workspace/group/x.txt')).toBe('/workspace/group/x.txt');
    for (const out of ['/etc/passwd', '../x', 'a/../../x', '/workspace/group', '/workspace/groupie/x', '/workspace/group/../group2/x', 'x\0.png', '.']) expect([out, workspacePath(out)]).toEqual([out, null]);
  });
});

describe('FileStore', () => {
  it('keeps at most its count and bytes, the oldest going first, and finds them again after a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-files-'));
    try {
      const kind = { type: 'text/plain; charset=utf-8', inline: false };
      const store = new FileStore(dir, { maxFiles: 3, maxBytes: 25 });
      const refs = ['one', 'two', 'three', 'four'].map((name) => store.put('family', `${name}.txt`, Buffer.alloc(10, name[0]), kind));
      // Four written, three allowed by count, two by bytes (30 > 25): the two oldest are gone.
      expect(refs.slice(0, 2).map((r) => store.get(r.id))).toEqual([null, null]);
      expect(store.get(refs[3].id)?.ref).toEqual(refs[3]);
      expect(readdirSync(dir).sort()).toEqual([refs[2].id, `${refs[2].id}.json`, refs[3].id, `${refs[3].id}.json`].sort());
      const again = new FileStore(dir, { maxFiles: 3, maxBytes: 25 });
      expect(again.get(refs[2].id)?.group).toBe('family');
      expect(existsSync(again.get(refs[3].id)!.path)).toBe(true);
      expect(again.get('../../etc/passwd')).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when full, the group holding the most gives up its oldest: a group that floods it pushes out its own files, not another\'s', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-files-'));
    try {
      const kind = { type: 'text/plain; charset=utf-8', inline: false };
      const store = new FileStore(dir, { maxFiles: 10, maxBytes: 1000 });
      const quiet = [1, 2, 3].map((n) => store.put('family', `${n}.txt`, Buffer.alloc(10), kind));
      const flood = Array.from({ length: 50 }, (_, n) => store.put('work', `${n}.txt`, Buffer.alloc(10), kind));
      expect(quiet.map((r) => store.get(r.id)?.group)).toEqual(['family', 'family', 'family']);
      expect(flood.slice(-7).map((r) => store.get(r.id)?.group)).toEqual(Array(7).fill('work'));
      expect(store.get(flood[42].id)).toBeNull();
      // By bytes: work holds 960 of 1000 when family adds 80, so work's files go (its large one too), not family's.
      const big = store.put('work', 'big.bin', Buffer.alloc(900), kind);
      const fourth = store.put('family', '4.txt', Buffer.alloc(80), kind);
      expect([...quiet, fourth].map((r) => store.get(r.id)?.group)).toEqual(['family', 'family', 'family', 'family']);
      expect(store.get(big.id)).toBeNull();
      // The one file just kept stays, even when its group holds the most.
      const huge = store.put('family', 'huge.bin', Buffer.alloc(990), kind);
      expect(store.get(huge.id)?.group).toBe('family');
      expect(store.get(fourth.id)).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is private without making the folders above it private (plugins\' folders sit beside it)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-files-'));
    try {
      new FileStore(join(dir, 'data', 'files'));
      expect(statSync(join(dir, 'data', 'files')).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'data')).mode & 0o777).toBe(0o755 & ~process.umask());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
