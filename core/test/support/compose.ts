// The appliance through Docker Compose, for the tests that start it as a user would: one
// project (its own name, compose file and volumes folder, the admin API on a free port),
// run with docker-compose or `docker compose`, whichever this machine has.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT, sleep } from '../harness.js';

/**
 * The default bridge's gateway (e.g. 172.17.0.1): an address of this machine that
 * containers on any bridge network reach, so stand-ins listening there serve compose.yaml's
 * services as they are (no host networking), and nothing leaves the machine. A freshly
 * started dockerd may leave the gateway out of the bridge's IPAM config, so the address
 * of the bridge's own interface (docker0) is the answer whenever the engine runs here;
 * the IPAM entry only when it does not.
 */
export function bridgeGateway(docker: string): string {
  const inspect = (format: string): string => execFileSync(docker, ['network', 'inspect', 'bridge', '-f', format], { encoding: 'utf8' }).trim();
  const name = inspect('{{index .Options "com.docker.network.bridge.name"}}') || 'docker0';
  const address = networkInterfaces()[name]?.find((a) => a.family === 'IPv4')?.address;
  if (address) return address;
  // networkInterfaces() leaves out an interface that is not running: docker0 while no
  // container is on the default bridge. Its address is still the host's.
  const listed = /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', name], { encoding: 'utf8' }).stdout ?? '')?.[1];
  if (listed) return listed;
  const gateway = inspect('{{range .IPAM.Config}}{{.Gateway}}{{end}}');
  if (!gateway) throw new Error(`the default bridge has no gateway in its IPAM config and no interface "${name}" here`);
  return gateway;
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
    /** CARAPACE_VOLUMES: config/carapace.json, data, logs and groups. */
    readonly volumes: string,
    /** CARAPACE_ADMIN_PORT. */
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {}

  /** A volumes folder with `config` as carapace.json, and a free admin port. Nothing runs yet. */
  static async create(options: { name: string; file: string; config: unknown; env: Record<string, string> }): Promise<ComposeProject> {
    const volumes = mkdtempSync(join(tmpdir(), `${options.name}-`));
    for (const d of ['config', 'data', 'logs', 'groups']) mkdirSync(join(volumes, d));
    writeFileSync(join(volumes, 'config', 'carapace.json'), JSON.stringify(options.config));
    return new ComposeProject(options.name, options.file, volumes, await freePort(), options.env);
  }

  /** One compose command from the repository root; its stdout. */
  run(args: string[]): string {
    const [cmd, pre] = existsSync('/usr/bin/docker-compose') ? ['docker-compose', []] : ['docker', ['compose']];
    return execFileSync(cmd, [...pre, '-p', this.name, '-f', this.file, ...args], {
      cwd: ROOT,
      env: { ...process.env, CARAPACE_INSTANCE: this.name, CARAPACE_VOLUMES: this.volumes, CARAPACE_ADMIN_PORT: String(this.port), ...this.env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  /** /health, or null while the core does not answer. */
  async health(): Promise<Health | null> {
    try {
      const token = this.env.CARAPACE_ADMIN_TOKEN;
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      const r = await fetch(`http://127.0.0.1:${this.port}/health`, { headers, signal: AbortSignal.timeout(2000) });
      return r.ok ? ((await r.json()) as Health) : null;
    } catch {
      return null;
    }
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
