// `make backup` and `make restore` against the appliance under Compose (compose.yaml as it
// is), run by a person who is not root (uid 1234, in the docker group): the archive's path
// is the last line printed, the file is theirs and 0600, and it holds the plugins'
// databases from their 0700 folders (a drop-in plugin's own SQLite file, open in WAL mode)
// and both kinds of workspace image: one the core's way attached (read through its volume)
// and one not attached (attached read-only for the backup, detached after). The running
// appliance is never restored over; stopped, `make restore FORCE=1` puts everything back
// with the plugins' own uids and the workspaces as folders. Skipped without a Docker engine.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tar from 'tar';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { LoopStorage } from '../../src/agents/storage.js';
import { readStatus } from '../../src/backup/status.js';
import { ROOT, until } from '../harness.js';
import { AGENT_IMAGE } from '../support/agents.js';
import { ComposeProject, type Health } from '../support/compose.js';

const DOCKER = process.env.DOCKER || '/usr/bin/docker';
const PERSON = 1234;
const engine = spawnSync(DOCKER, ['info'], { stdio: 'ignore' }).status === 0;
const dockerGid = (): number => statSync('/var/run/docker.sock').gid;

(engine && process.getuid?.() === 0 ? describe : describe.skip)('make backup / make restore with the appliance under Compose', () => {
  const name = `carapace-backup-${process.pid}`;
  let project: ComposeProject;
  let storage: LoopStorage;
  let home: string;
  let backups: string;
  let archive = '';

  /** `make <args>` in the repository, as the person (uid 1234 with the docker socket's group). */
  const make = (args: string[]): { status: number | null; stdout: string; stderr: string } => {
    const r = spawnSync('setpriv', [`--reuid=${PERSON}`, `--regid=${PERSON}`, `--groups=${dockerGid()}`, 'make', '--no-print-directory', ...args, `DOCKER=${DOCKER}`], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      env: { PATH: process.env.PATH, HOME: home, COMPOSE_PROJECT_NAME: name, COMPOSE_FILE: join(ROOT, 'compose.yaml'), CARAPACE_VOLUMES: project.volumes, CARAPACE_BACKUPS: backups, CARAPACE_ADMIN_PORT: String(project.port), CARAPACE_INSTANCE: name },
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const loopsOf = (image: string): string => execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).trim();

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'carapace-backup-home-'));
    chownSync(home, PERSON, PERSON);
    backups = join(home, 'backups');
    mkdirSync(backups);
    chownSync(backups, PERSON, PERSON);
    // The core's first scheduled backup 20 s after it starts (the plugins are up by then), not ten minutes.
    const override = join(home, 'compose.override.yaml');
    writeFileSync(override, 'services:\n  core:\n    environment:\n      CARAPACE_BACKUP_CATCH_UP_MS: "20000"\n');
    project = await ComposeProject.create({
      name,
      file: join(ROOT, 'compose.yaml'),
      overrides: [override],
      config: { groups: { main: {}, side: {} }, agents: { image: AGENT_IMAGE, disk_quota_mb: 16 } },
      env: { ANTHROPIC_API_KEY: 'sk-ant-api03-backup-test-key-0123456789abcdef', TELEGRAM_BOT_TOKEN: '', CARAPACE_BACKUPS: backups },
    });
    cpSync(join(ROOT, 'core/test/fixtures/drop-ins/ledger'), join(project.volumes, 'plugins', 'ledger'), { recursive: true });
    project.run(['up', '-d', 'core', 'plugins']);
    const ready = (h: Health): boolean => h.plugins.healthy.includes('ledger');
    const health = await project.waitForHealth(ready);
    if (!(health && ready(health))) throw new Error(`the appliance did not become healthy:\n${project.run(['logs', '--tail', '60'])}`);
    // The scheduled one (the core's own one-off container) is over before the workspaces are made.
    await until(() => readStatus(join(project.volumes, 'data')).last?.kind === 'scheduled', 60_000).catch(() => {
      throw new Error(`no scheduled backup:\n${project.run(['logs', '--tail', '40', 'core'])}`);
    });
    // Two workspaces as the core makes them: "main" attached with its volume (as while its
    // agent runs), "side" an image nobody has attached (as after `docker compose down`).
    storage = new LoopStorage(new DockerRuntime(), { groupsDir: join(project.volumes, 'groups'), instance: name }, { image: AGENT_IMAGE, disk_quota_mb: 16 });
    for (const group of ['main', 'side']) {
      const [mount] = await storage.mounts(group);
      execFileSync(DOCKER, ['run', '--rm', '--network', 'none', '-u', '1000', '-v', `${mount.source}:/w`, '--entrypoint', 'sh', AGENT_IMAGE, '-c', `mkdir -p /w/notes && echo "${group}: buy milk" > /w/notes/list.txt && ln -s /etc/passwd /w/link`]);
    }
    await storage.destroy('side', false);
  }, 240_000);

  afterAll(async () => {
    try {
      project?.down();
    } finally {
      for (const group of ['main', 'side']) await storage?.destroy(group, true).catch(() => undefined);
      project?.removeVolumes();
      rmSync(home, { recursive: true, force: true });
    }
  }, 120_000);

  it('the core\'s scheduled backup, made through the Docker socket by a root container of its image: in the folder, its owner\'s, audited', async () => {
    const last = readStatus(join(project.volumes, 'data')).last!;
    if (!last.ok) throw new Error(`the scheduled backup failed: ${last.code}: ${last.message}\n${project.run(['logs', '--tail', '40', 'core'])}`);
    expect(last.path).toMatch(new RegExp(`^${backups}/carapace-\\d{4}-\\d{2}-\\d{2}-\\d{6}-scheduled\\.tar\\.gz$`));
    const stat = statSync(last.path!);
    expect({ uid: stat.uid, mode: stat.mode & 0o777 }).toEqual({ uid: PERSON, mode: 0o600 });
    const paths: string[] = [];
    await tar.t({ file: last.path!, onReadEntry: (e) => paths.push(e.path) });
    expect(paths).toContain('data/plugins/ledger/ledger.sqlite');
    const entry = await until(() => readFileSync(join(project.volumes, 'logs', 'audit.jsonl'), 'utf8').split('\n').find((l) => l.includes('backup made (scheduled)')), 10_000);
    expect(JSON.parse(entry)).toMatchObject({ source: 'backup', outcome: 'ok' });
  });

  it('`make backup` as a person: the path last, the file theirs and 0600, the plugins\' databases and both workspaces in it, nothing left attached', async () => {
    const r = make(['backup']);
    if (r.status !== 0) throw new Error(`make backup failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
    archive = r.stdout.trim().split('\n').at(-1)!;
    expect(archive).toMatch(new RegExp(`^${backups}/carapace-\\d{4}-\\d{2}-\\d{2}-\\d{6}\\.tar\\.gz$`));
    const stat = statSync(archive);
    expect({ uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o777 }).toEqual({ uid: PERSON, gid: PERSON, mode: 0o600 });
    expect(r.stdout).toContain('Left out: groups/main/link: not a regular file (SymbolicLink)');

    const unpacked = mkdtempSync(join(tmpdir(), 'carapace-backup-unpacked-'));
    try {
      await tar.x({ file: archive, cwd: unpacked });
      const manifest = JSON.parse(readFileSync(join(unpacked, 'manifest.json'), 'utf8')) as { files: { path: string; sqlite?: { user_version: number } }[]; workspaces: { group: string; from: string }[] };
      const byPath = new Map(manifest.files.map((f) => [f.path, f]));
      expect(byPath.get('data/plugins/ledger/ledger.sqlite')?.sqlite).toEqual({ user_version: 5 });
      expect([...byPath.keys()]).toEqual(expect.arrayContaining(['config/carapace.json', 'data/event-keys.sqlite', 'data/plugins/.uids.json', 'logs/audit.jsonl', 'groups/main/notes/list.txt', 'groups/side/notes/list.txt']));
      expect([...byPath.keys()].filter((p) => p.startsWith('data/plugins/') && byPath.get(p)?.sqlite)).toContain('data/plugins/ledger/ledger.sqlite');
      expect(manifest.workspaces).toEqual([{ group: 'main', from: 'image' }, { group: 'side', from: 'image' }]);
      expect(readFileSync(join(unpacked, 'groups/side/notes/list.txt'), 'utf8')).toBe('side: buy milk\n');
      const db = new Database(join(unpacked, 'data/plugins/ledger/ledger.sqlite'), { readonly: true });
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect((db.prepare('SELECT count(*) AS n FROM lines').get() as { n: number }).n).toBeGreaterThanOrEqual(1);
      db.close();
    } finally {
      rmSync(unpacked, { recursive: true, force: true });
    }
    // "main" stays as it was (the core's device and volume); "side" was attached only for the copy.
    expect(loopsOf(join(project.volumes, 'groups', 'main.img'))).not.toBe('');
    expect(loopsOf(join(project.volumes, 'groups', 'side.img'))).toBe('');
    expect(execFileSync(DOCKER, ['volume', 'ls', '-q', '--filter', `name=carapace-${name}-`], { encoding: 'utf8' }).trim().split('\n')).toEqual([`carapace-${name}-main-workspace`]);
    expect(execFileSync(DOCKER, ['ps', '-aq', '--filter', `label=carapace.instance=${name}`], { encoding: 'utf8' }).trim()).toBe('');
  }, 120_000);

  it('`make restore` refuses the running appliance and writes nothing', () => {
    const before = readFileSync(join(project.volumes, 'config', 'carapace.json'), 'utf8');
    const r = make(['restore', `ARCHIVE=${archive}`, 'FORCE=1']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/carapace: RESTORE_RUNNING: the appliance is running .*; stop it first/);
    expect(readFileSync(join(project.volumes, 'config', 'carapace.json'), 'utf8')).toBe(before);
  });

  it('the core audits the backup a person made (Activity)', async () => {
    const entry = await until(() => {
      const file = join(project.volumes, 'logs', 'audit.jsonl');
      return existsSync(file) && readFileSync(file, 'utf8').split('\n').find((l) => l.includes('backup made (manual)'));
    }, 45_000);
    expect(JSON.parse(entry)).toMatchObject({ stage: 'core', outcome: 'ok', reason: expect.stringContaining(`backup made (manual): ${archive}`) });
    // The Checks page (GET /doctor, `make doctor`) names the last one.
    const doctor = (await (await fetch(`http://127.0.0.1:${project.port}/doctor`, { headers: { authorization: `Bearer ${project.adminToken()}` } })).json()) as { checks: { id: string; status: string; detail: string }[] };
    expect(doctor.checks.find((c) => c.id === 'backups')).toMatchObject({ status: 'ok', detail: expect.stringContaining(`The last backup (manual) was made`) });
  }, 60_000);

  it('stopped, `make restore FORCE=1` puts it back: the plugins\' folders their own uids, workspaces as folders for the next attach', async () => {
    project.run(['down', '--timeout', '10']);
    await storage.destroy('main', false);
    const r = make(['restore', `ARCHIVE=${archive}`, 'FORCE=1']);
    if (r.status !== 0) throw new Error(`make restore failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
    expect(r.stdout).toContain('databases pass integrity_check');
    const { uids } = JSON.parse(readFileSync(join(project.volumes, 'data', 'plugins', '.uids.json'), 'utf8')) as { uids: Record<string, number> };
    const ledger = statSync(join(project.volumes, 'data', 'plugins', 'ledger'));
    expect({ uid: ledger.uid, mode: ledger.mode & 0o777 }).toEqual({ uid: uids.ledger, mode: 0o700 });
    expect(statSync(join(project.volumes, 'data', 'plugins', 'ledger', 'ledger.sqlite')).uid).toBe(uids.ledger);
    expect(statSync(join(project.volumes, 'data', 'event-keys.sqlite')).uid).toBe(1000);
    expect(existsSync(join(project.volumes, 'groups', 'main.img'))).toBe(false);
    expect(readFileSync(join(project.volumes, 'groups', 'main', 'notes', 'list.txt'), 'utf8')).toBe('main: buy milk\n');
    expect(statSync(join(project.volumes, 'groups', 'main', 'notes', 'list.txt')).uid).toBe(1000);
  }, 120_000);
});
