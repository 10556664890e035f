// How a skill's sandbox differs from run_program's (sandbox-runs/container-spec.ts): its
// image, its folder mounted read-only at /skill, a label naming it, and, for a skill that
// declares a network, its relay: a unix socket of the core's (skill-relay.ts) mounted at
// /run/carapace-skill, and, as the sandbox's main process (as nobody, so that no run can
// signal it), a tiny forwarder from 127.0.0.1:3128 to that socket. The sandbox itself keeps
// no network (--network none). A skill without hosts gets no socket at all. Each run's
// environment (never the sandbox's own) carries its settings and, with a relay, the proxy.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Resolver } from '../network/public-address.js';
import type { SandboxPlan } from '../sandbox-runs/warm-sandboxes.js';
import { SKILL_DIR } from './run-skill-tool.js';
import type { Skill } from './skill-discovery.js';
import { SkillRelay, type RefusalCode } from './skill-relay.js';

export const SKILL_LABEL = 'carapace.skill';
/** Where the sandbox has its relay's socket, and the proxy its runs are given. */
export const RELAY_MOUNT = '/run/carapace-skill';
export const PROXY = '127.0.0.1:3128';

/** The forwarder (node is in the sandbox image): each connection on 127.0.0.1:3128 joined to the relay's socket. */
export const FORWARDER = [
  "const net = require('net');",
  "net.createServer((c) => { const u = net.connect('/run/carapace-skill/relay.sock');",
  'const end = () => { c.destroy(); u.destroy(); };',
  "for (const s of [c, u]) { s.on('error', end); s.on('close', end); }",
  "c.pipe(u).pipe(c); }).listen(3128, '127.0.0.1');",
].join(' ');

export interface SkillSandboxDeps {
  /** A folder of the core's as the Docker host has it (agents/docker-runtime.ts hostPath). */
  hostPath(local: string): Promise<string>;
  /** Where relays' sockets are made (a folder only the core's user may enter). */
  relayDir: string;
  resolve: Resolver;
  log: Logger;
  /** A relay's refusal (or how many more there were), for the audit log. */
  refused(target: string | null, code: RefusalCode | null, words: string): void;
}

export function hasNetwork(skill: Pick<Skill, 'allow' | 'manifest'>): boolean {
  return skill.allow.hosts.length > 0 || skill.manifest.network.public;
}

export function skillPlan(skill: Skill, image: string, deps: SkillSandboxDeps): SandboxPlan {
  const name = skill.manifest.name;
  return {
    key: `skill:${name}`,
    label: `skill-${name}`,
    image,
    prepare: async () => {
      const binds = [`${await deps.hostPath(skill.dir)}:${SKILL_DIR}:ro`];
      const labels = { [SKILL_LABEL]: name };
      if (!hasNetwork(skill)) return { extra: { binds, labels }, close: () => undefined };
      mkdirSync(deps.relayDir, { recursive: true, mode: 0o700 });
      const socketPath = join(deps.relayDir, randomBytes(12).toString('hex'), 'relay.sock');
      const relay = await SkillRelay.open({
        skill: name,
        socketPath,
        allow: skill.allow,
        public: skill.manifest.network.public,
        resolve: deps.resolve,
        log: deps.log,
        refused: (target, code, words) => deps.refused(target, code, words),
        more: (count) => deps.refused(null, null, `${count} more connections refused (not audited one by one)`),
      });
      try {
        binds.push(`${await deps.hostPath(join(socketPath, '..'))}:${RELAY_MOUNT}:ro`);
      } catch (err) {
        relay.close();
        throw err;
      }
      return { extra: { binds, labels, command: ['node', '-e', FORWARDER] }, close: () => relay.close() };
    },
  };
}

/** The environment of one run of the skill (its secrets are added by the caller: skill-secrets.ts). */
export function skillEnv(skill: Skill): string[] {
  const settings = `CARAPACE_SKILL_SETTINGS=${JSON.stringify(skill.settings)}`;
  if (!hasNetwork(skill)) return [settings];
  const proxy = `http://${PROXY}`;
  return [settings, `HTTP_PROXY=${proxy}`, `HTTPS_PROXY=${proxy}`, `http_proxy=${proxy}`, `https_proxy=${proxy}`, `CARAPACE_PROXY=${PROXY}`];
}
