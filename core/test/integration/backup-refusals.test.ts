// What `restore` refuses, through the real CLI process on real archives and real SQLite
// files: an archive with one flipped byte in a database (the manifest's checksum), a
// database that fails integrity_check under a checksum made to match, a truncated archive, a
// file missing or one too many, an encrypted archive with a wrong passphrase, none, or a
// flipped byte; a target that is not empty (without force) or whose core is running (even
// with force). Each is one line with its code, exit status 1, and nothing written to the target.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import * as tar from 'tar';
import { ROOT } from '../harness.js';

const CLI = join(ROOT, 'dist/core/src/backup/cli.js');
const PASSPHRASE = 'a passphrase for the refusal tests';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, CARAPACE_RUN_DIR: join(dir, 'no-run'), ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

let dir: string;
let plain: string;
let encrypted: string;
const DB = 'data/plugins/memory/family.sqlite';

/** Every file under `root` with its bytes' hash: what "nothing changed" compares. */
function snapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(root, p)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  if (existsSync(root)) walk(root);
  return out;
}

/** The archive unpacked, changed by `edit`, packed again as the backup packs it (manifest first). */
async function repacked(name: string, edit: (unpacked: string) => void, from = plain): Promise<string> {
  const unpacked = mkdtempSync(join(dir, 'unpacked-'));
  await tar.x({ file: from, cwd: unpacked });
  edit(unpacked);
  const files = Object.keys(snapshot(unpacked)).filter((f) => f !== 'manifest.json').sort();
  const out = join(dir, name);
  await tar.c({ gzip: true, file: out, cwd: unpacked, portable: true }, ['manifest.json', ...files]);
  return out;
}

/** manifest.json's entry for `path` made to match the file as it is now. */
function rehash(unpacked: string, path: string): void {
  const manifest = JSON.parse(readFileSync(join(unpacked, 'manifest.json'), 'utf8')) as { files: { path: string; size: number; sha256: string }[] };
  const bytes = readFileSync(join(unpacked, path));
  const entry = manifest.files.find((f) => f.path === path)!;
  entry.size = bytes.length;
  entry.sha256 = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(unpacked, 'manifest.json'), JSON.stringify(manifest));
}

function flipByte(file: string, offset: number): void {
  const bytes = readFileSync(file);
  bytes[offset] ^= 0xff;
  writeFileSync(file, bytes);
}

/** Restores into a fresh folder that must stay absent, and returns the one line it printed. */
async function refused(archive: string, code: string, env: Record<string, string> = {}): Promise<string> {
  const target = join(dir, `target-${Math.random().toString(36).slice(2)}`);
  const r = await cli(['restore', archive, '--volumes', target, '--staging', dir], env);
  expect(r.code).toBe(1);
  expect(r.stdout).toBe('');
  const lines = r.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^carapace: ${code}: `));
  expect(existsSync(target)).toBe(false);
  expect(readdirSync(dir).filter((n) => n.startsWith('carapace-restore-'))).toEqual([]); // its staging folder is gone too
  return lines[0];
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-backup-refusals-'));
  const volumes = join(dir, 'volumes');
  for (const area of ['config', 'data/plugins/memory', 'logs', 'groups/family']) mkdirSync(join(volumes, area), { recursive: true });
  writeFileSync(join(volumes, 'config', 'carapace.json'), JSON.stringify({ groups: { family: {} } }));
  const db = new Database(join(volumes, DB));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO notes (text) VALUES (?)');
  for (let i = 0; i < 400; i++) insert.run(`note ${i}: ${'the milk is in the fridge '.repeat(8)}`);
  db.pragma('user_version = 3');
  db.close();
  writeFileSync(join(volumes, 'data', 'standing-approvals.json'), '{"version":1,"approvals":[]}\n');
  writeFileSync(join(volumes, 'logs', 'audit.jsonl'), '{"stage":"core","reason":"core 0.1.0 started"}\n');
  writeFileSync(join(volumes, 'groups', 'family', 'list.txt'), 'milk\neggs\n');
  const out = join(dir, 'archives');
  const made = await cli(['create', '--volumes', volumes, '--out', out]);
  expect(made.code).toBe(0);
  plain = made.stdout.trim().split('\n').at(-1)!;
  const sealed = await cli(['create', '--volumes', volumes, '--out', out], { CARAPACE_BACKUP_PASSPHRASE: PASSPHRASE });
  expect(sealed.code).toBe(0);
  encrypted = sealed.stdout.trim().split('\n').at(-1)!;
  expect(encrypted).toMatch(/\.tar\.gz\.enc$/);
}, 60_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('restore refuses a damaged archive and writes nothing', () => {
  it('the sound archives restore (the baseline the others differ from by one thing)', async () => {
    for (const [archive, env] of [[plain, {}], [encrypted, { CARAPACE_BACKUP_PASSPHRASE: PASSPHRASE }]] as const) {
      const target = join(dir, `sound-${Math.random().toString(36).slice(2)}`);
      const r = await cli(['restore', archive, '--volumes', target, '--staging', dir], env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const db = new Database(join(target, DB), { readonly: true });
      expect(db.prepare('SELECT count(*) AS n FROM notes').get()).toEqual({ n: 400 });
      expect(db.pragma('user_version', { simple: true })).toBe(3);
      db.close();
      expect(readFileSync(join(target, 'groups', 'family', 'list.txt'), 'utf8')).toBe('milk\neggs\n');
    }
  });

  it('one flipped byte in a database inside: BACKUP_DAMAGED by its checksum', async () => {
    const archive = await repacked('flipped.tar.gz', (u) => flipByte(join(u, DB), 3 * 4096 - 100));
    expect(await refused(archive, 'BACKUP_DAMAGED')).toContain(`${DB} does not match its checksum`);
  });

  it('a database that fails integrity_check, even with a checksum made to match: BACKUP_DAMAGED', async () => {
    const archive = await repacked('corrupt-db.tar.gz', (u) => {
      flipByte(join(u, DB), 4096); // page 2's header: the table's root page
      rehash(u, DB);
    });
    expect(await refused(archive, 'BACKUP_DAMAGED')).toContain(`${DB} in ${archive} fails integrity_check`);
  });

  it('a truncated archive: BACKUP_DAMAGED', async () => {
    const archive = join(dir, 'truncated.tar.gz');
    cpSync(plain, archive);
    truncateSync(archive, Math.floor(statSync(plain).size * 0.6));
    expect(await refused(archive, 'BACKUP_DAMAGED')).toMatch(/cannot be read|lacks/);
  });

  it('a file the manifest lists is missing, or one it does not list is there: BACKUP_DAMAGED', async () => {
    const missing = await repacked('missing.tar.gz', (u) => rmSync(join(u, 'data', 'standing-approvals.json')));
    expect(await refused(missing, 'BACKUP_DAMAGED')).toContain('lacks 1 file(s) its manifest lists: data/standing-approvals.json');
    const extra = await repacked('extra.tar.gz', (u) => writeFileSync(join(u, 'config', 'planted.json'), '{}'));
    expect(await refused(extra, 'BACKUP_DAMAGED')).toContain('holds config/planted.json, which its manifest does not list');
  });

  it('an encrypted archive: a wrong passphrase, none, or one flipped byte', async () => {
    expect(await refused(encrypted, 'BACKUP_WRONG_PASSPHRASE', { CARAPACE_BACKUP_PASSPHRASE: 'not the passphrase at all' })).toContain('the passphrase does not open');
    await refused(encrypted, 'BACKUP_PASSPHRASE_NEEDED');
    const flipped = join(dir, 'flipped.tar.gz.enc');
    cpSync(encrypted, flipped);
    flipByte(flipped, Math.floor(statSync(encrypted).size / 2));
    expect(await refused(flipped, 'BACKUP_DAMAGED', { CARAPACE_BACKUP_PASSPHRASE: PASSPHRASE })).toContain('does not authenticate');
    const cut = join(dir, 'cut.tar.gz.enc');
    cpSync(encrypted, cut);
    truncateSync(cut, statSync(encrypted).size - 20);
    await refused(cut, 'BACKUP_DAMAGED', { CARAPACE_BACKUP_PASSPHRASE: PASSPHRASE });
  });
});

describe('restore refuses to overwrite', () => {
  let target: string;
  let before: Record<string, string>;
  beforeAll(() => {
    target = join(dir, 'in-use');
    mkdirSync(join(target, 'config'), { recursive: true });
    mkdirSync(join(target, 'data'), { recursive: true });
    writeFileSync(join(target, 'config', 'carapace.json'), '{"groups":{"work":{}}}');
    writeFileSync(join(target, 'data', 'standing-approvals.json'), '{"theirs":true}');
    before = snapshot(target);
  });

  it('a folder that is not empty, without force: RESTORE_NOT_EMPTY, nothing changed; with force it is replaced', async () => {
    const r = await cli(['restore', plain, '--volumes', target, '--staging', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^carapace: RESTORE_NOT_EMPTY: the installation's folders are not empty \(config\/carapace\.json, data\/standing-approvals\.json\); .*FORCE=1/);
    expect(snapshot(target)).toEqual(before);

    const forced = await cli(['restore', plain, '--volumes', target, '--staging', dir, '--force']);
    expect(forced.code).toBe(0);
    expect(JSON.parse(readFileSync(join(target, 'config', 'carapace.json'), 'utf8'))).toEqual({ groups: { family: {} } });
    expect(readFileSync(join(target, 'data', 'standing-approvals.json'), 'utf8')).toBe('{"version":1,"approvals":[]}\n');
  });

  it('a running installation (its core answers on the run folder\'s socket): RESTORE_RUNNING, even with force', async () => {
    const run = join(dir, 'run');
    mkdirSync(run, { recursive: true });
    const core: Server = createServer((c) => c.end());
    await new Promise<void>((resolve) => core.listen(join(run, 'plugins.sock'), resolve));
    const now = snapshot(target);
    try {
      const r = await cli(['restore', plain, '--volumes', target, '--staging', dir, '--force', '--run-dir', run]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toMatch(/^carapace: RESTORE_RUNNING: the installation is running .*; stop it first/);
      expect(snapshot(target)).toEqual(now);
    } finally {
      await new Promise((resolve) => core.close(resolve));
    }
    // A socket file a killed core left behind answers nobody: not "running".
    writeFileSync(join(run, 'plugins.sock'), '');
    const stale = await cli(['restore', plain, '--volumes', target, '--staging', dir, '--force', '--run-dir', run]);
    expect(stale.code).toBe(0);
  });
});

describe('secrets only when asked', () => {
  it('without --secrets neither .env nor the admin token is archived; with it both are, and restore keeps an existing .env', async () => {
    const volumes = join(dir, 'with-token');
    for (const area of ['config', 'data', 'logs', 'groups']) mkdirSync(join(volumes, area), { recursive: true });
    writeFileSync(join(volumes, 'data', 'admin-token'), 'an-admin-token-of-32-characters-x\n', { mode: 0o600 });
    const env = join(dir, 'project.env');
    writeFileSync(env, 'ANTHROPIC_API_KEY=sk-ant-secret\n');
    const list = async (archive: string): Promise<string[]> => {
      const paths: string[] = [];
      await tar.t({ file: archive, onReadEntry: (e) => paths.push(e.path) });
      return paths;
    };
    const without = await cli(['create', '--volumes', volumes, '--out', join(dir, 'secret-archives'), '--dotenv', env]);
    expect(without.code).toBe(0);
    expect((await list(without.stdout.trim().split('\n').at(-1)!)).filter((p) => p.includes('admin-token') || p.includes('.env'))).toEqual([]);
    await new Promise((r) => setTimeout(r, 1100)); // another second, another name
    const withSecrets = await cli(['create', '--volumes', volumes, '--out', join(dir, 'secret-archives'), '--secrets', '--dotenv', env]);
    expect(withSecrets.code).toBe(0);
    const archive = withSecrets.stdout.trim().split('\n').at(-1)!;
    expect(await list(archive)).toEqual(expect.arrayContaining(['data/admin-token', 'secrets/.env']));

    const target = join(dir, 'secret-target');
    const existing = join(dir, 'existing.env');
    writeFileSync(existing, 'ANTHROPIC_API_KEY=the-one-in-use\n');
    const restored = await cli(['restore', archive, '--volumes', target, '--staging', dir, '--dotenv', existing]);
    expect(restored.code).toBe(0);
    expect(readFileSync(existing, 'utf8')).toBe('ANTHROPIC_API_KEY=the-one-in-use\n');
    expect(readFileSync(`${existing}.restored`, 'utf8')).toBe('ANTHROPIC_API_KEY=sk-ant-secret\n');
    expect(statSync(`${existing}.restored`).mode & 0o777).toBe(0o600);
    expect(restored.stdout).toContain(`a .env exists: the archive's is at ${existing}.restored`);
    expect(readFileSync(join(target, 'data', 'admin-token'), 'utf8')).toBe('an-admin-token-of-32-characters-x\n');
    expect(statSync(join(target, 'data', 'admin-token')).mode & 0o777).toBe(0o600);
  });
});
