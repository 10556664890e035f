// Skills as the docker tests wire them: the bundled skills (and a folder of the test's own),
// the stack's core, the sandbox runs of support/sandbox-runs.ts, and a relay whose names
// resolve through the test's own table. And a stand-in "public" web server: a container
// (runc: the engine's runsc has no network) at 93.184.216.34 on an internal Docker network
// of that public, unrouted-here subnet, so that the relay's public-only rule lets it
// through; before any test connects, the host's route to it must be that network's bridge
// (nothing may leave this machine). No Jest here.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import pino from 'pino';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { parseConfig } from '../../src/config.js';
import type { JsonObject } from '../../src/protocol/envelope.js';
import type { Resolver } from '../../src/network/public-address.js';
import type { SandboxRuns } from '../../src/sandbox-runs/wiring.js';
import { skillRuns } from '../../src/skills/wiring.js';
import type { SkillRuns } from '../../src/skills/skill-runs.js';
import { ROOT, type Stack } from '../harness.js';
import { invokeTool, SANDBOX_IMAGE, type RunResult, type ToolCall } from './sandbox-runs.js';
import { standInScript } from './web-standins.js';

export const PUBLIC_SUBNET = '93.184.216.0/24';
export const STANDIN_ADDRESS = '93.184.216.34';
/** Names the test's resolver knows. */
export const WEB_HOST = 'web.carapace-test.example';
export const SEARX_HOST = 'searx.carapace-test.example';
const STANDIN_LABEL = 'carapace.test-standin';

export const testNames: Record<string, string[]> = {
  [WEB_HOST]: [STANDIN_ADDRESS],
  [SEARX_HOST]: [STANDIN_ADDRESS],
  'private.test': ['10.9.8.7'],
  'rebind.test': [STANDIN_ADDRESS, '127.0.0.1'],
};

/** The relay's resolver in these tests (and how often each name was asked). */
export function testResolver(asked: string[] = []): Resolver {
  return async (host) => {
    asked.push(host);
    if (Object.hasOwn(testNames, host)) return testNames[host];
    throw Object.assign(new Error(`${host} is not a test name`), { code: 'ENOTFOUND' });
  };
}

export class PublicStandIn {
  private constructor(readonly runtime: DockerRuntime, readonly network: string, readonly container: string) {}

  /** The network, the stand-in, and the route check; leftovers of an earlier run removed first. */
  static async start(runtime: DockerRuntime, tag: string): Promise<PublicStandIn> {
    const docker = runtime.docker;
    for (const c of await docker.listContainers({ all: true, filters: { label: [STANDIN_LABEL] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
    for (const n of await docker.listNetworks({ filters: { label: [STANDIN_LABEL] } })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
    const name = `carapace-test-public-${tag}`;
    const network = await docker.createNetwork({ Name: name, Internal: true, Labels: { [STANDIN_LABEL]: 'true' }, IPAM: { Config: [{ Subnet: PUBLIC_SUBNET }] } });
    const route = execFileSync('ip', ['route', 'get', STANDIN_ADDRESS], { encoding: 'utf8' });
    if (!route.includes(`dev br-${network.id.slice(0, 12)}`)) {
      await network.remove().catch(() => undefined);
      throw new Error(`the host's route to ${STANDIN_ADDRESS} is not the test network's bridge (${route.trim()}): refusing to run`);
    }
    const container = await docker.createContainer({
      name: `${name}-web`,
      Image: SANDBOX_IMAGE,
      User: '0:0',
      Entrypoint: ['node', '-e', standInScript(`http://${WEB_HOST}`)],
      Labels: { [STANDIN_LABEL]: 'true' },
      HostConfig: { Runtime: 'runc', NetworkMode: name, CapDrop: ['ALL'], CapAdd: ['NET_BIND_SERVICE'], ReadonlyRootfs: true },
      NetworkingConfig: { EndpointsConfig: { [name]: { IPAMConfig: { IPv4Address: STANDIN_ADDRESS } } } },
    });
    await container.start();
    const standIn = new PublicStandIn(runtime, network.id, container.id);
    await standIn.ready();
    return standIn;
  }

  /** Until the stand-in answers (from the host, on its bridge). */
  private async ready(): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`http://${STANDIN_ADDRESS}/page.html`, { signal: AbortSignal.timeout(1000) }).then((r) => r.ok, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('the stand-in web server did not answer');
  }

  async stop(): Promise<void> {
    await this.runtime.docker.getContainer(this.container).remove({ force: true }).catch(() => undefined);
    await this.runtime.docker.getNetwork(this.network).remove().catch(() => undefined);
  }
}

export interface SkillWiring {
  skills: SkillRuns;
  secrets: string[];
}

/** The skills for the stack's core (accepted with `programs`), their relays resolving through `resolve`. */
export function wireSkills(stack: Stack, runtime: DockerRuntime, programs: SandboxRuns, options: { own?: string; sections?: Record<string, JsonObject>; env?: NodeJS.ProcessEnv; resolve: Resolver }): SkillWiring {
  const wired = skillRuns({
    programs,
    runtime,
    settings: parseConfig({ sandbox: { image: SANDBOX_IMAGE } }).sandbox,
    folders: { bundled: join(ROOT, 'skills'), own: options.own ?? null },
    sections: options.sections ?? {},
    audit: stack.core.audit,
    log: pino({ level: 'silent' }),
    env: options.env ?? {},
    relayDir: join(stack.dir, 'skill-relays'),
    resolve: options.resolve,
  });
  stack.core.acceptRuns(programs.runs, (session) => programs.sandboxes.end(session), wired);
  return { skills: wired.runner, secrets: wired.secrets };
}

export type SkillResult = RunResult & { skill: string; external_content: true };

export function runSkill(runtime: DockerRuntime, container: string, args: Record<string, unknown>): Promise<ToolCall<SkillResult>> {
  return invokeTool<SkillResult>(runtime, container, 'run_skill', args);
}

/** fetch.py's answer (its stdout) from a run_skill result. */
export function fetched(call: ToolCall<SkillResult>): Record<string, any> {
  if (!call.result) throw new Error(`run_skill failed: ${JSON.stringify(call.error)}`);
  return JSON.parse(call.result.stdout) as Record<string, any>;
}
