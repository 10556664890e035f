// A real CalDAV server for tests: Debian's Radicale (`apt-get install radicale`) on
// 127.0.0.1 with a free port, its own storage folder and htpasswd (plain) users, started
// per test file and stopped after it. Also a small HTTP client for checking what is stored.
import { freePort, sleep } from '../harness.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RadicaleUser {
  username: string;
  password: string;
}

export interface DavAnswer {
  status: number;
  body: string;
  etag: string | null;
}

/** The Radicale command: $CARAPACE_RADICALE (a command line), else Debian's /usr/bin/radicale. */
function radicaleCommand(): string[] {
  const configured = process.env.CARAPACE_RADICALE?.trim();
  if (configured) return configured.split(/\s+/);
  for (const candidate of ['/usr/bin/radicale', '/usr/local/bin/radicale']) if (existsSync(candidate)) return [candidate];
  // Debian's python3 has the module even where another python3 comes first on PATH.
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import radicale'], { stdio: 'ignore' });
  if (probe.status === 0) return ['/usr/bin/python3', '-m', 'radicale'];
  throw new Error('Radicale is not installed: apt-get install -y radicale (or set CARAPACE_RADICALE)');
}

export class Radicale {
  readonly dir = mkdtempSync(join(tmpdir(), 'cp-radicale-'));
  port = 0;
  output = '';
  private child: ChildProcess | null = null;

  private constructor(readonly users: RadicaleUser[]) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/`;
  }

  /** Starts Radicale and waits until it answers HTTP. Retries with another port if one was taken meanwhile. */
  static async start(users: RadicaleUser[]): Promise<Radicale> {
    const server = new Radicale(users);
    writeFileSync(join(server.dir, 'users'), users.map((u) => `${u.username}:${u.password}`).join('\n') + '\n');
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await server.launch(await freePort());
        return server;
      } catch (err) {
        lastError = err;
        await server.stop(false);
      }
    }
    rmSync(server.dir, { recursive: true, force: true });
    throw lastError;
  }

  private async launch(port: number): Promise<void> {
    this.port = port;
    this.output = '';
    const config = join(this.dir, 'config');
    // A complete configuration: Debian's /etc/radicale/config is not read (--config replaces it).
    writeFileSync(
      config,
      [
        '[server]',
        `hosts = 127.0.0.1:${port}`,
        'ssl = False',
        '[auth]',
        'type = htpasswd',
        `htpasswd_filename = ${join(this.dir, 'users')}`,
        'htpasswd_encryption = plain',
        'delay = 0',
        '[rights]',
        'type = owner_only',
        '[storage]',
        `filesystem_folder = ${join(this.dir, 'collections')}`,
        '[web]',
        'type = none',
        '[logging]',
        'level = warning',
        'mask_passwords = True',
        '',
      ].join('\n'),
    );
    const [cmd, ...args] = radicaleCommand();
    const child = spawn(cmd, [...args, '--config', config], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, HOME: this.dir, LANG: 'C.UTF-8' } });
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`radicale exited (${child.exitCode ?? child.signalCode}): ${this.output}`);
      try {
        const res = await fetch(this.url, { method: 'OPTIONS', signal: AbortSignal.timeout(1000) });
        await res.body?.cancel();
        return;
      } catch {
        if (Date.now() > deadline) throw new Error(`radicale did not answer on port ${port}: ${this.output}`);
        await sleep(100);
      }
    }
  }

  private auth(user: RadicaleUser = this.users[0]): string {
    return `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
  }

  /** One request as `user` (the first user by default); `path` is relative to the server root. */
  async request(method: string, path: string, body?: string, headers: Record<string, string> = {}, user?: RadicaleUser): Promise<DavAnswer> {
    const res = await fetch(new URL(path, this.url), {
      method,
      headers: { authorization: this.auth(user), ...headers },
      body,
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text(), etag: res.headers.get('etag') };
  }

  /** MKCALENDAR /<user>/<slug>/ with a display name and the component types it holds. */
  async makeCalendar(slug: string, displayName: string, components: string[] = ['VTODO'], user: RadicaleUser = this.users[0]): Promise<string> {
    const path = `/${user.username}/${slug}/`;
    const escape = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    const xml =
      '<?xml version="1.0" encoding="utf-8"?>' +
      '<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop>' +
      `<D:displayname>${escape(displayName)}</D:displayname>` +
      `<C:supported-calendar-component-set>${components.map((c) => `<C:comp name="${c}"/>`).join('')}</C:supported-calendar-component-set>` +
      '</D:prop></D:set></C:mkcalendar>';
    const res = await this.request('MKCALENDAR', path, xml, { 'content-type': 'application/xml; charset=utf-8' }, user);
    if (res.status !== 201) throw new Error(`MKCALENDAR ${path} failed: ${res.status} ${res.body}`);
    return path;
  }

  /** The raw iCalendar text of an object, or null when there is none. */
  async getObject(path: string, user?: RadicaleUser): Promise<string | null> {
    const res = await this.request('GET', path, undefined, {}, user);
    if (res.status === 404) return null;
    if (res.status !== 200) throw new Error(`GET ${path} failed: ${res.status}`);
    return res.body;
  }

  /**
   * The file Radicale keeps for an object on its own disk (`path` as for `request`,
   * /<user>/<collection>/<name>.ics), or null when there is none: what the server stored,
   * not what it answers with.
   */
  storedFile(path: string): string | null {
    const file = this.storagePath(path);
    return existsSync(file) ? readFileSync(file, 'utf8') : null;
  }

  /** The object files of a collection on Radicale's disk (/<user>/<collection>/), sorted. */
  storedFiles(collection: string): string[] {
    return readdirSync(this.storagePath(collection))
      .filter((f) => f.endsWith('.ics'))
      .sort();
  }

  private storagePath(path: string): string {
    const parts = path.split('/').filter((p) => p !== '');
    if (parts.some((p) => p === '..' || p === '.')) throw new Error(`not a storage path: ${path}`);
    return join(this.dir, 'collections', 'collection-root', ...parts);
  }

  /** Display names of the user's calendar collections (from a PROPFIND of the home). */
  async collections(user: RadicaleUser = this.users[0]): Promise<string[]> {
    const res = await this.request('PROPFIND', `/${user.username}/`, '<?xml version="1.0"?><propfind xmlns="DAV:"><prop><displayname/></prop></propfind>', { depth: '1', 'content-type': 'application/xml' }, user);
    return [...res.body.matchAll(/<(?:\w+:)?displayname>([^<]*)<\/(?:\w+:)?displayname>/g)].map((m) => m[1]);
  }

  async stop(removeFiles = true): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    if (removeFiles) rmSync(this.dir, { recursive: true, force: true });
  }
}
