// The appliance end to end, as a user runs it, in both agent modes: compose.yaml as it is
// (core and plugin host in their containers on the project's network), the core starting
// the group's agent as a sibling container through the Docker socket (bind mounts
// resolved to host paths), the real Claude Code CLI, and only bundled plugins:
// a Telegram message → memory_store → send_telegram → Telegram.
//
// The Telegram and model stand-ins listen on the default bridge's gateway, which the
// services reach like any address; the model one through CARAPACE_MODEL_API_URL.
// Agents have `NetworkMode: none` in both modes (API-mode ones serve on a unix socket the
// core reaches through a bind mount); each mode's agent is attacked from inside: the
// core's admin API, the plugin host, the stand-ins on the host.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { LoopStorage } from '../../src/agents/storage.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { ROOT, until } from '../harness.js';
import { AGENT_IMAGE } from '../support/agents.js';
import { bridgeGateway, ComposeProject, type Health } from '../support/compose.js';
import { expectModelSawMessage, expectPipelineTrail, REPLY, sendUserMessage, startStandIns, type RecordTool, type StandIns } from '../support/milk-scenario.js';
import { probeCommand, probeOutcomes, type Target } from '../support/reach.js';
import type { SentMessage } from '../support/telegram-standin.js';
import type { RecordedRequest } from '../support/anthropic-standin.js';

const MODEL_KEY = 'sk-ant-api03-appliance-test-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAApplianceTestTokenForTheStandIn0001';
const MEMORY_RECORD: RecordTool = { tool: 'memory_store', args: { type: 'context', content: 'buy milk at 5pm' } };
/** A person's own plugin in plain JavaScript, dropped into volumes/plugins/: no build, no image rebuild. */
const DROP_IN_RECORD: RecordTool = { tool: 'jot', args: { text: 'buy milk at 5pm' } };
const DOCKER = process.env.DOCKER || 'docker';

/**
 * The request's last user message is the person's `text` itself (not a tool result): the model
 * is asked to start on it. (A session's first request may end with a system-role message.)
 */
const asksAnew = (request: RecordedRequest, text: string): boolean => {
  const last = JSON.stringify((request.body?.messages ?? []).filter((m: { role?: string }) => m.role === 'user').at(-1) ?? '');
  return last.includes(text) && !last.includes('"tool_result"');
};

const inspect = (id: string): Docker.ContainerInspectInfo => (JSON.parse(execFileSync(DOCKER, ['inspect', id], { encoding: 'utf8' })) as Docker.ContainerInspectInfo[])[0];

/** One run of the appliance: carapace.json's `agents` section and extra .env values. */
interface Mode {
  mode: 'legacy' | 'api';
  chat: number;
  /** The tool the agent records the reminder with. */
  record: RecordTool;
  agents: Record<string, unknown>;
  env: Record<string, string>;
}

describe.each<Mode>([
  { mode: 'legacy', chat: 2002, record: MEMORY_RECORD, agents: {}, env: {} },
  // No admin token: API-mode agents share no network with the core either.
  { mode: 'api', chat: 2003, record: DROP_IN_RECORD, agents: { mode: 'api' }, env: {} },
])('the appliance in $mode mode, end to end (core and plugin host in their containers)', ({ mode, chat, record: RECORD, agents, env }) => {
  const name = `carapace-appliance-${mode}-${process.pid}`;
  let project: ComposeProject;
  let standIns: StandIns;
  /** The bot's answer to a message that was already waiting when the appliance started. */
  let answer: Promise<SentMessage>;

  const compose = (args: string[]): string => project.run(args);
  const agentContainers = (): string[] =>
    execFileSync(DOCKER, ['ps', '-aq', '--filter', `label=carapace.instance=${name}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const auditEntries = (): AuditEntry[] => {
    const file = join(project.volumes, 'logs', 'audit.jsonl');
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as AuditEntry);
  };

  beforeAll(async () => {
    standIns = await startStandIns(chat, BOT_TOKEN, RECORD, bridgeGateway(DOCKER));
    project = await ComposeProject.create({
      name,
      file: join(ROOT, 'compose.yaml'),
      config: {
        groups: { main: {} },
        agents: { image: AGENT_IMAGE, run_timeout_ms: 120_000, ...agents },
        plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: standIns.telegram.url, chats: { [String(chat)]: 'main' }, owners: [42], poll_timeout_s: 1 } },
      },
      env: { CARAPACE_MODEL_API_URL: standIns.modelUrl, ANTHROPIC_API_KEY: MODEL_KEY, TELEGRAM_BOT_TOKEN: BOT_TOKEN, ...env },
    });
    cpSync(join(ROOT, 'core/test/fixtures/drop-ins/jotter'), join(project.volumes, 'plugins', 'jotter'), { recursive: true });
    // Written while the appliance is down: the plugin host may publish it the moment it
    // connects, before the core has finished starting. It must not be lost.
    answer = sendUserMessage(standIns.telegram, chat);
    answer.catch(() => undefined); // awaited (and reported) in the test
    compose(['up', '-d', 'core', 'plugins']);
    const ready = (h: Health): boolean => ['telegram', 'memory', 'jotter'].every((p) => h.plugins.healthy.includes(p));
    const health = await project.waitForHealth(ready);
    if (!(health && ready(health))) throw new Error(`the appliance did not become healthy:\n${compose(['logs', '--tail', '80'])}`);
  }, 300_000);

  afterAll(async () => {
    try {
      project?.down();
    } finally {
      // The core retires its agents when it stops; anything left is removed here.
      const left = agentContainers();
      if (left.length > 0) execFileSync(DOCKER, ['rm', '-f', ...left]);
      // The group's disk volume and loop device (its image file goes with the folder).
      if (project) await new LoopStorage(new DockerRuntime(), { groupsDir: join(project.volumes, 'groups'), instance: name }, { image: AGENT_IMAGE, disk_quota_mb: 2048 }).destroy('main', true);
      project?.removeVolumes();
      await standIns?.close();
    }
  }, 120_000);

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

  (mode === 'api' ? it : it.skip)('the drop-in plugin ran in a process of its own and wrote only into its own folder', () => {
    const file = join(project.volumes, 'data', 'plugins', 'jotter', 'jots.txt');
    expect(readFileSync(file, 'utf8')).toBe('buy milk at 5pm\n');
    expect(statSync(file).uid).toBeGreaterThanOrEqual(20_001);
  });

  (mode === 'legacy' ? it : it.skip)("the plugin host: each plugin a uid of its own with no powers; as one of them, nothing of the core's or another plugin's, and no network", () => {
    // Every node process of the plugins container: uid and effective capabilities.
    const table = compose(['exec', '-T', 'plugins', 'sh', '-c', `for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in *node*) echo "$(awk '/^Uid/{print $2}' $p/status) $(awk '/^CapEff/{print $2}' $p/status) $c";; esac; done`]);
    const rows = table.split('\n').filter(Boolean).map((line) => line.split(' '));
    const host = rows.filter((r) => r[2] === 'node' && r[3] === 'dist/core/plugin-host/main.js');
    const runners = rows.filter((r) => r.some((a) => a.endsWith('runner/main.js')));
    expect(host).toHaveLength(1);
    expect(host[0][0]).toBe('0');
    // CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID: bits 0, 1, 3, 5, 6, 7.
    expect(host[0][1]).toBe('00000000000000eb');
    expect(runners.length).toBeGreaterThanOrEqual(3); // telegram, memory, tasks, webchat
    expect(new Set(runners.map((r) => r[0])).size).toBe(runners.length);
    for (const [uid, caps] of runners) {
      expect(Number(uid)).toBeGreaterThanOrEqual(20_001);
      expect(caps).toBe('0000000000000000');
    }
    const { uids } = JSON.parse(readFileSync(join(project.volumes, 'data', 'plugins', '.uids.json'), 'utf8')) as { uids: Record<string, number> };
    const hostPid = compose(['exec', '-T', 'plugins', 'sh', '-c', "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^node dist/core/plugin-host/[m]ain.js' && basename $p; done; true"]).trim();
    // As the Telegram plugin's uid, which holds the bot token: what else can it reach?
    const script = `
      const fs = require('fs'), net = require('net');
      const out = {};
      const tryFs = (k, f) => { try { f(); out[k] = 'ok'; } catch (e) { out[k] = e.code; } };
      tryFs('host_environ', () => fs.readFileSync('/proc/${hostPid}/environ'));
      tryFs('admin_token', () => fs.readFileSync('/app/volumes/data/admin-token'));
      tryFs('standing_approvals', () => fs.writeFileSync('/app/volumes/data/standing-approvals.json', '[]'));
      tryFs('memory_data', () => fs.readdirSync('/app/volumes/data/plugins/memory'));
      tryFs('tmp', () => fs.writeFileSync('/tmp/planted', 'x'));
      tryFs('own_data', () => fs.writeFileSync('/app/volumes/data/plugins/telegram/planted', 'x'));
      const connect = (k, o) => new Promise((r) => { const s = net.connect(o, () => { out[k] = 'ok'; s.destroy(); r(); }); s.on('error', (e) => { out[k] = e.code; r(); }); s.setTimeout(3000, () => { out[k] = 'timeout'; s.destroy(); r(); }); });
      (async () => {
        await connect('egress_socket', { path: '/run/carapace-egress/egress.sock' });
        await connect('core_plugin_socket', { path: '/run/carapace/plugins.sock' });
        await connect('admin_api', { host: 'core', port: 8780 });
        await connect('telegram_directly', { host: '${new URL(standIns.telegram.url).hostname}', port: ${new URL(standIns.telegram.url).port} });
        console.log(JSON.stringify(out));
      })();`;
    const seen = JSON.parse(compose(['exec', '-T', '-u', String(uids.telegram), 'plugins', 'node', '-e', script]).trim().split('\n').at(-1)!);
    expect(seen).toEqual({
      host_environ: 'EACCES',
      admin_token: 'ENOENT',
      standing_approvals: 'EROFS',
      memory_data: 'EACCES',
      tmp: 'EROFS',
      own_data: 'ok',
      egress_socket: 'EACCES',
      core_plugin_socket: 'EACCES',
      admin_api: 'EAI_AGAIN',
      telegram_directly: 'ENETUNREACH',
    });
  });

  it('started the agent as a locked-down sibling container whose mounts are host paths', () => {
    const [id] = agentContainers();
    expect(id).toBeDefined();
    const info = inspect(id);
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    // The workspace is the quota-held volume (agents.disk_quota_mb's default), its image made
    // by the unprivileged containerized core in its groups folder; Claude Code's state is a
    // size-limited tmpfs that ends with the container.
    const workspace = info.Mounts.find((m) => m.Destination === '/workspace/group');
    expect(workspace).toMatchObject({ Type: 'volume', Name: `carapace-${name}-main-workspace`, RW: true });
    expect(info.HostConfig.Tmpfs?.['/home/node/.claude']).toMatch(/size=\d+m/);
    expect(existsSync(join(project.volumes, 'groups', 'main.img'))).toBe(true);
    // Paths on the host, not the core container's own view (/app/volumes/...).
    expect(info.Mounts.find((m) => m.Destination === '/home/node/.claude/CLAUDE.md')?.Source.startsWith(join(project.volumes, 'data', 'agents', 'sessions'))).toBe(true);
    expect(info.Mounts.some((m) => m.Source.startsWith('/app/'))).toBe(false);
    expect(info.Config.Env.join('\n')).not.toContain(MODEL_KEY);
    expect(info.HostConfig.NetworkMode).toBe('none');
    const core = inspect(compose(['ps', '-q', 'core']).trim());
    // The core joined no network of the agents' (there is none): only the project's own.
    expect(Object.keys(core.NetworkSettings.Networks)).toEqual([`${name}_default`]);
  });

  it("from inside the agent: no admin API, no plugin host, no stand-in on the host, by address or by name", () => {
    const [id] = agentContainers();
    const services = ['core', 'plugins'].map((service) => inspect(compose(['ps', '-q', service]).trim()));
    const addresses = services.flatMap((c) => Object.values(c.NetworkSettings.Networks ?? {}).map((n) => n.IPAddress)).filter((a) => a);
    expect(addresses.length).toBeGreaterThan(0);
    const model = new URL(standIns.modelUrl);
    const targets: Target[] = [
      ...addresses.map((host) => ({ host, port: 8780 })),
      { host: 'core', port: 8780 },
      { host: 'plugins', port: 8780 },
      { host: model.hostname, port: Number(model.port) },
      { host: new URL(standIns.telegram.url).hostname, port: Number(new URL(standIns.telegram.url).port) },
    ];
    const out = execFileSync(DOCKER, ['exec', '-u', '1000:1000', id, ...probeCommand(targets)], { encoding: 'utf8' });
    const outcomes = probeOutcomes(targets, out);
    for (const [target, outcome] of Object.entries(outcomes)) {
      // No route: ENETUNREACH under runc, EHOSTUNREACH under gVisor; names do not resolve.
      expect([target, outcome]).toEqual([target, expect.stringMatching(/^(ENETUNREACH|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$/)]);
    }
  });

  it('from inside the agent: no writable place in host memory beyond its bound (issue 21: 931 MB in the session folder)', () => {
    const [id] = agentContainers();
    const run = (script: string) => execFileSync(DOCKER, ['exec', '-u', '1000:1000', id, 'sh', '-c', `${script} 2>&1; true`], { encoding: 'utf8' });
    expect(run('dd if=/dev/zero of=/run/carapace/fill bs=1M count=64')).toMatch(/Read-only file system/);
    if (mode === 'api') {
      // Its own server's folder is writable (it creates its socket there), on a 16 MB tmpfs.
      expect(run('dd if=/dev/zero of=/run/api/fill bs=1M count=64')).toMatch(/No space left on device/);
      expect(Number(run('stat -c %s /run/api/fill').trim())).toBeLessThanOrEqual(16 * 1024 * 1024);
      run('rm -f /run/api/fill');
    }
  });

  // A real crash: the core's node process gets SIGKILL while the model is still answering,
  // and Compose's restart policy starts it again. The message is not lost without a word,
  // and not run a second time (the agent may have acted on part of it).
  (mode === 'legacy' ? it : it.skip)('kill -9 of the core in the middle of a turn: after the restart the person is told, once, that the message was not handled', async () => {
    const text = 'book the table for friday';
    const { model, telegram } = standIns;
    const [requestsBefore, sentBefore] = [model.requests.length, telegram.sentTo(chat).length];
    const mentions = (from: number): number => model.requests.slice(from).filter((r) => JSON.stringify(r.body?.messages ?? '').includes(text)).length;
    // The turn of the first test may still be making its last model request (its reply went
    // out before it): with the model held below, that turn would hold the group for its whole
    // run_timeout (issue 22: the two minutes this test once took, and its failures).
    await until(() => auditEntries().some((e) => e.stage === 'agent' && e.reason === 'agent run completed'), 60_000);
    model.delayMs = 600_000;
    try {
      const t0 = Date.now();
      telegram.queueMessage({ chatId: chat, text, fromId: 42 });
      await until(() => mentions(requestsBefore) > 0, 30_000);
      const reached = Date.now() - t0;
      const core = compose(['ps', '-q', 'core']).trim();
      const started = inspect(core).State.StartedAt;
      const top = execFileSync(DOCKER, ['top', core, '-eo', 'pid,args'], { encoding: 'utf8' }).split('\n');
      // The node process itself, not the init (docker-init) that runs it.
      const pid = Number(top.find((line) => /^\s*\d+\s+node dist\/core\/src\/main\.js/.test(line))?.trim().split(/\s+/)[0]);
      expect(pid).toBeGreaterThan(1);
      const killedAt = model.requests.length;
      process.kill(pid, 'SIGKILL');
      const notHandled = (): SentMessage[] => telegram.sentTo(chat).slice(sentBefore).filter((m) => m.text.includes('not handled'));
      const [notice] = await until(() => notHandled().length > 0 && notHandled(), 120_000).catch((err: unknown) => {
        const audit = auditEntries().slice(-25).map((e) => JSON.stringify(e)).join('\n');
        throw new Error(`${String(err)}\n${compose(['logs', '--tail', '60', 'core'])}\n${audit}\nsent: ${JSON.stringify(telegram.sentTo(chat).slice(sentBefore))}`);
      });
      // eslint-disable-next-line no-console
      console.log(`kill -9 test: the message reached the model in ${reached} ms; killed to notice ${Date.now() - t0 - reached} ms`);
      expect(inspect(core).State.StartedAt).not.toBe(started); // the same container, started again
      expect(notice.text).toContain(`"${text}"`);
      const health = await project.waitForHealth((h) => ['telegram', 'memory'].every((p) => h.plugins.healthy.includes(p)));
      expect(health).toBeTruthy();
      expect(notHandled()).toHaveLength(1);
      expect(mentions(killedAt)).toBe(0); // never run again
      expect(auditEntries().filter((e) => e.stage === 'agent' && /not handled/.test(e.reason ?? ''))).toHaveLength(1);
    } finally {
      model.delayMs = 0;
    }
  }, 300_000);

  // Last: it stops the appliance. Docker's default 10 s before SIGKILL would cut the drain
  // short; compose.yaml's stop_grace_period lets a tool call in flight finish.
  (mode === 'legacy' ? it : it.skip)('docker compose stop with a tool call in flight (Telegram answering after 12 s) lets it finish', async () => {
    const sends = standIns.telegram.heldSends;
    standIns.telegram.holdNextSends(1, 12_000);
    const reply = sendUserMessage(standIns.telegram, chat);
    reply.catch(() => undefined);
    await until(() => standIns.telegram.heldSends > sends, 120_000);
    await project.runAsync(['stop']);
    expect((await reply).text).toBe(REPLY);
    const entries = auditEntries();
    const answered = entries.filter((e) => e.topic === 'tool.invoke.send_telegram' && e.stage === 'response');
    expect(answered.map((e) => e.outcome)).toEqual(['ok', 'ok']);
    const stopped = entries.findIndex((e) => e.stage === 'core' && e.reason === 'core stopped');
    expect(stopped).toBeGreaterThan(entries.indexOf(answered[1]));
  }, 180_000);

  // Compose stops the core before the plugin host (compose.yaml: the core depends on it),
  // so what the core says on its way out still reaches the chat: a prompt with live buttons
  // is edited to say it was withdrawn. Started again for this (the test above stopped it).
  (mode === 'legacy' ? it : it.skip)('docker compose stop with a confirmation prompt open: the prompt in Telegram says it was withdrawn, nothing ran', async () => {
    const { model, telegram } = standIns;
    compose(['start']);
    const ready = (h: Health): boolean => ['telegram', 'tasks'].every((p) => h.plugins.healthy.includes(p));
    expect(await project.waitForHealth(ready)).toBeTruthy();
    const args = { prompt: 'water the plants', cron: '0 9 * * 1' };
    const policy = model.policy;
    // The agent asks for a high-risk call, which waits for a person.
    model.policy = (request) =>
      asksAnew(request, 'water the plants every monday') && JSON.stringify(request.body?.tools ?? []).includes('Bash')
        ? [{ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.schedule_recurring_task '${JSON.stringify(args)}'`, description: 'Schedule it' } }]
        : [{ type: 'text', text: 'ok' }];
    try {
      telegram.queueMessage({ chatId: chat, text: 'water the plants every monday', fromId: 42 });
      const prompt = await until(() => telegram.sentTo(chat).find((m) => m.reply_markup !== undefined && m.text.includes('schedule_recurring_task') && m.text.includes('water the plants')), 150_000).catch((err: unknown) => {
        const audit = auditEntries().slice(-40).map((e) => JSON.stringify(e)).join('\n');
        throw new Error(`${String(err)}\n${compose(['logs', '--tail', '80', 'core', 'plugins'])}\n${audit}\nsent: ${JSON.stringify(telegram.sentTo(chat).slice(-5))}\nmodel requests: ${model.requests.length}`);
      });
      await project.runAsync(['stop']);
      const edit = telegram.edits.find((e) => e.chat_id === String(chat) && e.message_id === prompt.message_id);
      expect(edit?.text).toBe(`${prompt.text}\n\nWithdrawn (core: shutting down): nothing ran`);
      expect(edit?.reply_markup).toBeUndefined();
      // Issue 22: the stopped core detached the loop device of the group's workspace (10 were left on a test machine).
      expect(execFileSync('losetup', ['-j', join(project.volumes, 'groups', 'main.img')], { encoding: 'utf8' }).trim()).toBe('');
    } finally {
      model.policy = policy;
    }
  }, 300_000);

  // Issue 22, with the core in its container (it reads the kernel's ext4 error counter
  // through the container's /sys as uid 1000): a file system error under the workspace stops
  // the agent, CRITICAL in the audit log, and the person is told on Telegram. After the
  // stops above: started again, and an agent started with a message first.
  (mode === 'legacy' ? it : it.skip)('a file system error under the workspace: the agent is stopped, CRITICAL in the audit, the person told', async () => {
    compose(['start']);
    expect(await project.waitForHealth((h) => ['telegram', 'memory'].every((p) => h.plugins.healthy.includes(p)))).toBeTruthy();
    expect((await sendUserMessage(standIns.telegram, chat)).text).toBe(REPLY);
    const running = agentContainers().filter((id) => inspect(id).State.Running);
    expect(running).toHaveLength(1);
    const device = execFileSync('losetup', ['-j', join(project.volumes, 'groups', 'main.img')], { encoding: 'utf8' }).split(':')[0].trim();
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    const sentBefore = standIns.telegram.sentTo(chat).length;
    // The kernel's own fault injection: a real ext4 error on that device.
    writeFileSync(`/sys/fs/ext4/${device.replace('/dev/', '')}/trigger_fs_error`, 'carapace fault injection');
    const entry = await until(() => auditEntries().find((e) => e.code === 'WORKSPACE_FS_ERROR'), 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${compose(['logs', '--tail', '40', 'core'])}`);
    });
    expect(entry).toMatchObject({ severity: 'CRITICAL', group: 'main' });
    const told = await until(() => standIns.telegram.sentTo(chat).slice(sentBefore).find((m) => m.text.includes("the storage of this group's files reported an error")), 20_000);
    expect(told.text).toContain('its agent was stopped');
    await until(() => running.every((id) => !agentContainers().includes(id)), 30_000);
  }, 300_000);
});
