// The parts of run_program that need no engine: what its arguments may mean, the names a
// run's files may have, how much of its output is kept, the archive its files are written
// with, and the sandbox's container options. The real sandbox: docker/sandbox-runs and
// docker/sandbox-attacks.
import { describe, expect, it } from '@jest/globals';
import tar from 'tar-stream';
import { BoundedOutput, HEAD_BYTES, KEPT_BYTES, TAIL_BYTES } from '../../src/sandbox-runs/bounded-output.js';
import { enginePidsLimit, sandboxCreateOptions } from '../../src/sandbox-runs/container-spec.js';
import { refuseName } from '../../src/sandbox-runs/output-names.js';
import { newRunId } from '../../src/sandbox-runs/program-runs.js';
import { runCommand } from '../../src/sandbox-runs/run-program-tool.js';
import { outputsArchive } from '../../src/sandbox-runs/write-outputs.js';
import { ToolFailure } from '../../src/protocol/errors.js';

describe('run_program arguments', () => {
  it('a program in the workspace, by a relative path or the agent\'s own absolute one; the interpreter from its extension', () => {
    expect(runCommand({ program: 'scripts/chart.py' }, 300)).toEqual({ interpreter: 'python3', program: 'scripts/chart.py', args: [], timeoutS: 60 });
    expect(runCommand({ program: '/workspace/group/a/../b.mjs', args: ['x'], timeout_s: 5 }, 300)).toEqual({ interpreter: 'node', program: 'b.mjs', args: ['x'], timeoutS: 5 });
    expect(runCommand({ program: './run.sh' }, 300)).toMatchObject({ interpreter: 'sh', program: 'run.sh' });
    expect(runCommand({ program: 'tool', interpreter: 'sh' }, 300)).toMatchObject({ interpreter: 'sh', program: 'tool' });
  });

  it.each([
    ['../x.py', 'program'],
    ['a/../../x.py', 'program'],
    ['/etc/passwd', 'program'],
    ['/workspace/group/../../etc/x.py', 'program'],
    ['.', 'program'],
    ['dir/', 'program'],
    ['a\nb.py', 'program'],
    ['notes.txt', 'interpreter'],
  ])('refuses %j (field %s)', (program, field) => {
    const r = runCommand({ program }, 300);
    expect(r).toBeInstanceOf(ToolFailure);
    expect((r as ToolFailure).error).toMatchObject({ code: 'VALIDATION_FAILED', field, stage: 6 });
  });

  it('holds timeout_s to carapace.json\'s sandbox.timeout_s', () => {
    expect((runCommand({ program: 'a.py', timeout_s: 120 }, 60) as ToolFailure).error).toMatchObject({ field: 'timeout_s', message: expect.stringContaining('at most 60') });
  });
});

describe('output names', () => {
  it('takes plain paths', () => {
    for (const name of ['chart.png', 'report 2026.pdf', 'a/b/c.csv', 'données.csv', 'グラフ.png', '-dash.txt']) expect(refuseName(name)).toBeNull();
  });

  it.each([
    ['..', '".."'],
    ['a/../b', '".."'],
    ['./a', '"."'],
    ['a//b', 'empty'],
    ['/abs', 'absolute'],
    ['a\nb', 'control'],
    ['tab\there', 'control'],
    ['evil\u202Etxt.exe', 'order-changing'],
    ['zero\u200Bwidth', 'invisible'],
    ['bad\uFFFDbytes', 'UTF-8'],
    ['back\\slash', 'backslash'],
    ['a/b/c/d/e', 'levels'],
    ['x'.repeat(201), 'longer'],
    ['é'.repeat(130), 'bytes'],
  ])('refuses %j (%s)', (name, says) => {
    expect(refuseName(name)).toContain(says);
  });
});

describe('bounded output', () => {
  it('keeps everything up to the bound', () => {
    const b = new BoundedOutput();
    b.push(Buffer.from('hello '));
    b.push(Buffer.from('world'));
    expect(b.result()).toEqual({ text: 'hello world', cut: 0 });
  });

  it('keeps the head and the tail of a flood, however it arrives, and says how much was cut', () => {
    const total = 300_000;
    const stream = Buffer.from(Array.from({ length: total }, (_, i) => String.fromCharCode(97 + (i % 26))).join(''));
    for (const chunk of [1, 1000, 7919, 65536, 200_000]) {
      const b = new BoundedOutput();
      for (let sent = 0; sent < total; sent += chunk) b.push(stream.subarray(sent, Math.min(total, sent + chunk)));
      const { text, cut } = b.result();
      expect(cut).toBe(total - KEPT_BYTES);
      expect(b.total).toBe(total);
      const [head, tail] = text.split(/\n\[… \d+ bytes cut …\]\n/);
      expect(head.length).toBe(HEAD_BYTES);
      expect(tail.length).toBe(TAIL_BYTES);
      expect(head.startsWith('abcdef')).toBe(true);
      expect(tail.endsWith(String.fromCharCode(97 + ((total - 1) % 26)))).toBe(true);
    }
  });
});

describe('the archive a run\'s files are written with', () => {
  it('holds runs/<id>/ and the files\' folders, then regular files, owned by 1000, 0755 and 0644', async () => {
    const archive = await outputsArchive('20261127-223001-3fa9c2', [{ name: 'chart.png', bytes: Buffer.from('png') }, { name: 'tables/a.csv', bytes: Buffer.from('a,b\n') }]);
    const extract = tar.extract();
    const seen: string[] = [];
    extract.end(archive);
    for await (const entry of extract) {
      const h = entry.header;
      seen.push(`${h.type} ${h.name} ${h.uid}:${h.gid} ${(h.mode ?? 0).toString(8)} ${h.size}`);
      entry.resume();
    }
    expect(seen).toEqual([
      'directory runs/ 1000:1000 755 0',
      'directory runs/20261127-223001-3fa9c2/ 1000:1000 755 0',
      'directory runs/20261127-223001-3fa9c2/tables/ 1000:1000 755 0',
      'file runs/20261127-223001-3fa9c2/chart.png 1000:1000 644 3',
      'file runs/20261127-223001-3fa9c2/tables/a.csv 1000:1000 644 4',
    ]);
  });

  it('names each run by its time and six random hex digits', () => {
    expect(newRunId(new Date('2026-11-27T22:30:01.123Z'))).toMatch(/^20261127-223001-[0-9a-f]{6}$/);
    expect(newRunId()).not.toBe(newRunId());
  });
});

describe('the sandbox container', () => {
  const spec = { name: 'n', image: 'carapace-sandbox:latest', instance: 'i', group: 'family', session: 's', workspace: { source: 'carapace-i-family-workspace', volume: true }, limits: { memory_mb: 512, cpus: 1, pids: 128 } };

  it('mounts the workspace read-only and nothing else but /out; no network, no capabilities, limits set', () => {
    const o = sandboxCreateOptions({ ...spec, runtime: 'runsc' });
    expect(o.HostConfig?.Binds).toEqual(['carapace-i-family-workspace:/workspace:ro,nocopy']);
    expect(o.HostConfig?.Mounts?.map((m) => [m.Type, m.Target, m.Source])).toEqual([['volume', '/out', '']]);
    expect(o.HostConfig).toMatchObject({ NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], Memory: 512 * 2 ** 20, MemorySwap: 512 * 2 ** 20, NanoCpus: 1e9, Runtime: 'runsc', Init: true });
    expect(o.Env).toEqual([]);
    expect(o.User).toBe('65534:65534');
    expect(sandboxCreateOptions({ ...spec, runtime: 'runc', workspace: { source: '/srv/groups/family', volume: false } }).HostConfig?.Binds).toEqual(['/srv/groups/family:/workspace:ro']);
  });

  it('counts processes as the engine does under each runtime', () => {
    expect(enginePidsLimit('runc', 128)).toBe(128);
    expect(enginePidsLimit('runsc', 128)).toBe(64 + 128 * 12);
  });
});
