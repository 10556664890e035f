// The appliance through Docker Compose, for the tests that start it as a user would: one
// project (its own name, compose file and volumes folder, the admin API on a free port),
// run with docker-compose or `docker compose`, whichever this machine has.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, ROOT, sleep } from '../harness.js';
import { ADMIN_TOKEN_FILE, readToken } from '../../src/console/admin-token.js';

/**
 * The default bridge's gateway (e.g. 172.17.0.1): an address of this machine that
 * containers on any bridge network reach, so stand-ins listening there serve compose.yaml's
 * services as they are (no host networking), and nothing leaves the machine. A freshly
 * started dockerd may leave the gateway out of the bridge's IPAM config (and docker0 is
 * down while no container uses it, so Node does not list its address): then a container
 * on the bridge says which gateway its default route uses, as it does on every engine.
 */
export function bridgeGateway(docker: string, image = 'carapace-core:latest'): string {
  const configured = execFileSync(docker, ['network', 'inspect', 'bridge', '-f', '{{range .IPAM.Config}}{{.Gateway}}{{end}}'], { encoding: 'utf8' }).trim();
  if (configured) return configured;
  const routes = execFileSync(docker, ['run', '--rm', '--network', 'bridge', '--entrypoint', 'cat', image, '/proc/net/route'], { encoding: 'utf8' });
  // Columns: Iface Destination Gateway ...; addresses are little-endian hex.
  const hex = routes.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[1] === '00000000')?.[2];
  if (!hex || !/^[0-9A-F]{8}$/i.test(hex)) throw new Error(`no default route on the default bridge:\n${routes}`);
  return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
}

/** What the admin API's /health answers. */
export interface Health {
  status: string;
  plugins: { healthy: string[]; failed: { name: string; category: string }[] };
}

export class ComposeProject {
  private constructor(
    /** The project name (-p), also CARAPACE_INSTANCE: the label of the agents its core starts. */
    readonly name: string,
    readonly file: string,
    /** Compose files laid over `file` (-f after -f), e.g. a service's extra environment. */
    private readonly overrides: string[],
    /** CARAPACE_VOLUMES: config/carapace.json, data, logs and groups. */
    readonly volumes: string,
    /** CARAPACE_ADMIN_PORT. */
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {}

  /** A volumes folder with `config` as carapace.json (none: a first start), and a free admin port. Nothing runs yet. */
  static async create(options: { name: string; file: string; overrides?: string[]; config?: unknown; env: Record<string, string> }): Promise<ComposeProject> {
    const volumes = mkdtempSync(join(tmpdir(), `${options.name}-`));
    for (const d of ['config', 'data', 'logs', 'groups', 'plugins']) mkdirSync(join(volumes, d));
    if (options.config !== undefined) writeFileSync(join(volumes, 'config', 'carapace.json'), JSON.stringify(options.config));
    return new ComposeProject(options.name, options.file, options.overrides ?? [], volumes, await freePort(), options.env);
  }

  /** One compose command from the repository root; its stdout. */
  run(args: string[]): string {
    const [cmd, argv, options] = this.command(args);
    return execFileSync(cmd, argv, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  /** The same, without blocking this process (whose stand-ins must keep answering meanwhile). */
  async runAsync(args: string[]): Promise<string> {
    const [cmd, argv, options] = this.command(args);
    return (await promisify(execFile)(cmd, argv, options)).stdout;
  }

  private command(args: string[]): [string, string[], { cwd: string; env: NodeJS.ProcessEnv; encoding: 'utf8' }] {
    const [cmd, pre] = existsSync('/usr/bin/docker-compose') ? ['docker-compose', []] : ['docker', ['compose']];
    const env = { ...process.env, CARAPACE_INSTANCE: this.name, CARAPACE_VOLUMES: this.volumes, CARAPACE_ADMIN_PORT: String(this.port), ...this.env };
    const files = [this.file, ...this.overrides].flatMap((f) => ['-f', f]);
    return [cmd, [...pre, '-p', this.name, ...files, ...args], { cwd: ROOT, env, encoding: 'utf8' }];
  }

  /** /health, or null while the core does not answer. */
  async health(): Promise<Health | null> {
    try {
      const token = this.adminToken();
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      const r = await fetch(`http://127.0.0.1:${this.port}/health`, { headers, signal: AbortSignal.timeout(2000) });
      return r.ok ? ((await r.json()) as Health) : null;
    } catch {
      return null;
    }
  }

  /** The one from the env, else the one the core made on its first start (null before that). */
  adminToken(): string | null {
    return this.env.CARAPACE_ADMIN_TOKEN || readToken(join(this.volumes, 'data', ADMIN_TOKEN_FILE));
  }

  /** Polls /health (for up to a minute) until `ready`; the last answer, ready or not. */
  async waitForHealth(ready: (h: Health) => boolean): Promise<Health | null> {
    let h = await this.health();
    for (let i = 0; i < 120 && !(h && ready(h)); i++) {
      await sleep(500);
      h = await this.health();
    }
    return h;
  }

  /** Stops the project and removes its containers, networks and named volumes. */
  down(): void {
    this.run(['down', '-v', '--timeout', '5']);
  }

  removeVolumes(): void {
    rmSync(this.volumes, { recursive: true, force: true });
  }
}
