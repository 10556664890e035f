// The appliance end to end, as a user runs it: compose.yaml's core and plugin host in
// their containers, the core starting the group's agent as a sibling container through
// the Docker socket (bind mounts resolved to host paths), the real Claude Code CLI, and
// only bundled plugins: a Telegram message → memory_store → send_telegram → Telegram.
//
// One change to compose.yaml, made here in a derived file: the core and the plugin host
// share the host's network namespace, so they reach the Telegram and model stand-ins on
// loopback (nothing in this workplace may be sent to a non-loopback address). Agents keep
// `NetworkMode: none`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { ROOT, until } from '../harness.js';
import { ComposeProject, type Health } from '../support/compose.js';
import { expectModelSawMessage, expectPipelineTrail, REPLY, sendUserMessage, startStandIns, type RecordTool, type StandIns } from '../support/milk-scenario.js';
import type { SentMessage } from '../support/telegram-standin.js';

const PROJECT = `carapace-appliance-${process.pid}`;
const COMPOSE_FILE = join(ROOT, `.compose-appliance-${process.pid}.yaml`);
const MODEL_KEY = 'sk-ant-api03-appliance-test-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAApplianceTestTokenForTheStandIn0001';
const CHAT = 2002;
const RECORD: RecordTool = { tool: 'memory_store', args: { type: 'context', content: 'buy milk at 5pm' } };
const DOCKER = process.env.DOCKER || 'docker';

let project: ComposeProject;
let standIns: StandIns;
/** The bot's answer to a message that was already waiting when the appliance started. */
let answer: Promise<SentMessage>;

/** compose.yaml with the core and the plugin host on the host's network; every edit must apply. */
function hostNetworkCompose(): string {
  let text = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
  const edit = (from: string, to: string): void => {
    if (!text.includes(from)) throw new Error(`compose.yaml changed: cannot find ${JSON.stringify(from)}`);
    text = text.replace(from, to);
  };
  edit('    ports:\n      - "127.0.0.1:${CARAPACE_ADMIN_PORT:-8780}:8780"\n', '    network_mode: host\n');
  edit('      CARAPACE_ADMIN_HOST: 0.0.0.0\n      CARAPACE_ADMIN_PORT: "8780"\n', '      CARAPACE_ADMIN_HOST: 127.0.0.1\n      CARAPACE_ADMIN_PORT: "${CARAPACE_ADMIN_PORT}"\n      CARAPACE_MODEL_API_URL: ${CARAPACE_MODEL_API_URL}\n');
  edit('    command: ["node", "dist/core/plugin-host/main.js"]\n', '    command: ["node", "dist/core/plugin-host/main.js"]\n    network_mode: host\n');
  return text;
}

const compose = (args: string[]): string => project.run(args);

const agentContainers = (): string[] =>
  execFileSync(DOCKER, ['ps', '-aq', '--filter', `label=carapace.instance=${PROJECT}`], { encoding: 'utf8' }).split('\n').filter(Boolean);

function auditEntries(): AuditEntry[] {
  const file = join(project.volumes, 'logs', 'audit.jsonl');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as AuditEntry);
}

beforeAll(async () => {
  standIns = await startStandIns(CHAT, BOT_TOKEN, RECORD);
  project = await ComposeProject.create({
    name: PROJECT,
    file: COMPOSE_FILE,
    config: {
      groups: { main: {} },
      agents: { run_timeout_ms: 120_000 },
      plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: standIns.telegram.url, chats: { [String(CHAT)]: 'main' }, owners: [42], poll_timeout_s: 1 } },
    },
    env: { CARAPACE_MODEL_API_URL: standIns.modelUrl, ANTHROPIC_API_KEY: MODEL_KEY, TELEGRAM_BOT_TOKEN: BOT_TOKEN },
  });
  writeFileSync(COMPOSE_FILE, hostNetworkCompose());
  // Written while the appliance is down: the plugin host may publish it the moment it
  // connects, before the core has finished starting. It must not be lost.
  answer = sendUserMessage(standIns.telegram, CHAT);
  answer.catch(() => undefined); // awaited (and reported) in the test
  compose(['up', '-d', 'core', 'plugins']);
  const ready = (h: Health): boolean => ['telegram', 'memory'].every((p) => h.plugins.healthy.includes(p));
  const health = await project.waitForHealth(ready);
  if (!(health && ready(health))) throw new Error(`the appliance did not become healthy:\n${compose(['logs', '--tail', '80'])}`);
}, 300_000);

afterAll(async () => {
  try {
    if (existsSync(COMPOSE_FILE)) compose(['down', '-v', '--timeout', '5']);
  } finally {
    // The core retires its agents when it stops; anything left is removed here.
    const left = agentContainers();
    if (left.length > 0) execFileSync(DOCKER, ['rm', '-f', ...left]);
    rmSync(COMPOSE_FILE, { force: true });
    project?.removeVolumes();
    await standIns?.close();
  }
}, 120_000);

describe('the appliance, end to end (core and plugin host in their containers)', () => {
  it('"remind me to buy milk at 5pm", sent while it was down → agent container → memory_store → send_telegram → Telegram', async () => {
    // On failure, say why: the bot's answer or the services' logs, and what the core audited.
    const trail = (): string => auditEntries().slice(-15).map((e) => JSON.stringify(e)).join('\n');
    const reply = await answer.catch((err: unknown) => {
      const polls = standIns.telegram.callsOf('getUpdates').map((c) => JSON.stringify(c)).slice(-5).join('\n');
      throw new Error(`${String(err)}\n${compose(['logs', '--tail', '80'])}\n${trail()}\npending: ${JSON.stringify(standIns.telegram.pendingUpdates())}\n${polls}`);
    });
    if (reply.text !== REPLY) throw new Error(`the bot answered: ${reply.text}\n${trail()}`);
    expectModelSawMessage(standIns.model, MODEL_KEY);
    // The audit log as the core wrote it to the logs volume.
    const entries = await until(() => {
      const all = auditEntries();
      return all.some((e) => e.topic === 'tool.invoke.send_telegram' && e.stage === 'response') && all;
    }, 10_000);
    expectPipelineTrail(entries, 'main', RECORD);
  }, 180_000);

  it('started the agent as a locked-down sibling container whose mounts are host paths', () => {
    const [id] = agentContainers();
    expect(id).toBeDefined();
    const [info] = JSON.parse(execFileSync(DOCKER, ['inspect', id], { encoding: 'utf8' })) as {
      HostConfig: { NetworkMode: string; ReadonlyRootfs: boolean; CapDrop: string[] };
      Mounts: { Source: string; Destination: string }[];
      Config: { Env: string[] };
    }[];
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    // Paths on the host, not the core container's own view (/app/volumes/...).
    const workspace = info.Mounts.find((m) => m.Destination === '/workspace/group');
    expect(workspace?.Source).toBe(join(project.volumes, 'groups', 'main'));
    expect(info.Mounts.some((m) => m.Source.startsWith('/app/'))).toBe(false);
    expect(info.Config.Env.join('\n')).not.toContain(MODEL_KEY);
  });
});
