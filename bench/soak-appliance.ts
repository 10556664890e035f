// The appliance's soak run (`make soak-appliance`): compose.yaml as a person runs it (core,
// plugin host, agents in their own containers with the real Claude Code), three groups each
// with a Telegram chat of its own (the Telegram stand-in) and the web chat of one of them,
// a scripted model (the model stand-in). A steady load of messages for SOAK_MINUTES
// (default 60): each is answered with send_telegram (send_webchat in the web chat); every
// 10th first stores a memory, every 15th first schedules a recurring task, a high-risk
// call the stand-in approves by pressing the prompt's button (then cancels it, so the
// groups' task lists stay as they were). Agents stay warm throughout: the stand-in bills
// each request as if SOAK_CONTEXT_KB (150) filled the model's window, so Claude Code
// compacts the conversation near there, as it does with a real model near its window
// (its summary request is answered with a summary). SOAK_FORGET_MINUTES clears each
// group's conversation ("/forget") that often instead: its agent ends and the next
// message starts a fresh session.
//
// Per minute: the RSS of the core, of the plugin host and of its plugin processes (host
// /proc), the core's V8 heap (its /metrics), messages sent and answered, and the p50/p99
// from a Telegram message to its reply. At the end: the least-squares slopes (MB/min) of
// the first and of the second half. SOAK_HEAP_SNAPSHOTS=5,15 writes the core's heap
// snapshots after those minutes into dist/soak/ (they pause the core and cost memory).
//
//   SOAK_MINUTES=15 DOCKER=/usr/bin/docker node dist/bench/soak-appliance.js
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { DockerRuntime } from '../core/src/agents/docker-runtime.js';
import { LoopStorage } from '../core/src/agents/storage.js';
import { ROOT, sleep, until } from '../core/test/harness.js';
import { AGENT_IMAGE } from '../core/test/support/agents.js';
import { AnthropicStandIn, hasTool, toolResults, type Block, type RecordedRequest } from '../core/test/support/anthropic-standin.js';
import { bridgeGateway, ComposeProject, type Health } from '../core/test/support/compose.js';
import { TelegramStandIn } from '../core/test/support/telegram-standin.js';
import { processTree, rssMb } from './proc.js';
import { r3, slope, stats } from './stats.js';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 60);
const PER_MINUTE = Number(process.env.SOAK_MESSAGES_PER_MINUTE ?? 36);
/** Each group's conversation cleared ("/forget": its agent ends, the next message starts a fresh one) this often; 0: never. */
const FORGET_MINUTES = Number(process.env.SOAK_FORGET_MINUTES ?? 0);
/** The stand-in bills a request of this many KB as a full context window (Claude Code then compacts); 0: never. */
const CONTEXT_KB = Number(process.env.SOAK_CONTEXT_KB ?? 150);
/** The window Claude Code assumes for the configured model, in tokens. */
const WINDOW_TOKENS = 1_000_000;
const SNAPSHOT_AT = (process.env.SOAK_HEAP_SNAPSHOTS ?? '').split(',').filter(Boolean).map(Number);
const DOCKER = process.env.DOCKER || 'docker';
const OUT = join(ROOT, 'dist', 'soak');
const MODEL_KEY = 'sk-ant-api03-soak-test-key-0123456789abcdef';
const BOT_TOKEN = '123456789:AAApplianceSoakTokenForTheStandIn0001';
const OWNER = 42;
const CHATS: Record<string, number> = { alpha: 3101, beta: 3102, gamma: 3103 };
const GROUPS = Object.keys(CHATS);
/** Every WEB_EVERY-th message to this group goes through the web chat instead. */
const WEB_GROUP = 'alpha';
const WEB_EVERY = 3;
/** Messages not yet answered a group may have before the next one waits (a person does not write into a void). */
const MAX_BACKLOG = 3;
/** A message unanswered this long is counted lost (e.g. a plugin restarted under it) and no longer waited for. */
const LOST_AFTER_MS = 180_000;
const MARK = /soak (plain|memory|approval) #(\d+) for (\w+)( via web)?/g;

const out = (line = ''): void => void process.stdout.write(`${line}\n`);
const mb = (bytes: number): number => bytes / 2 ** 20;

type Kind = 'plain' | 'memory' | 'approval';
interface Sent {
  group: string;
  web: boolean;
  at: number;
}

/** What the run counts, reset each minute where it says so. */
const tally = { sent: 0, answered: 0, approved: 0, memories: 0, otherReplies: 0, heldBack: 0, lost: 0, cleared: 0, requestKb: 0, compactions: 0 };
const waiting = new Map<number, Sent>();
let latencies: number[] = [];
const lastOthers: string[] = [];
const model = new AnthropicStandIn(policy);

function answered(id: number): void {
  const sent = waiting.get(id);
  if (!sent) return;
  waiting.delete(id);
  tally.answered++;
  if (!sent.web) latencies.push(Date.now() - sent.at);
}

/**
 * The scripted model: for the message(s) of the turn (markers in the person's text), the
 * steps in order (a memory, the approved task and its cancellation, the replies); then it
 * ends the turn. Requests without Claude Code's tools (its side calls) get a short text.
 */
function policy(request: RecordedRequest): Block[] {
  if (!hasTool(request, 'Bash')) return [{ type: 'text', text: 'ok' }];
  // The agent's conversation grows with every turn: its size. Billed as if CONTEXT_KB filled
  // the model's window, so that Claude Code compacts it near there, as it does with a real model.
  const bytes = Number(request.headers['content-length'] ?? 0);
  tally.requestKb = Math.max(tally.requestKb, bytes / 1024);
  model.usage = { input_tokens: CONTEXT_KB > 0 ? Math.round((bytes / (CONTEXT_KB * 1024)) * WINDOW_TOKENS) : 12, output_tokens: 7 };
  const messages = (request.body?.messages ?? []) as { role: string; content: unknown }[];
  // Claude Code's compaction: it asks for a summary in text, no tools.
  if (/Respond with TEXT ONLY/.test(JSON.stringify(messages.at(-1) ?? ''))) {
    tally.compactions++;
    return [{ type: 'text', text: '<analysis>A soak run.</analysis>\n<summary>The person sends numbered soak messages; each was answered.</summary>' }];
  }
  const prompt = JSON.stringify(messages.filter((m) => m.role === 'user' && !JSON.stringify(m.content).includes('"tool_result"')).at(-1) ?? '');
  const marks = [...prompt.matchAll(MARK)].map((m) => ({ kind: m[1] as Kind, id: Number(m[2]), group: m[3], web: Boolean(m[4]) }));
  if (marks.length === 0) return [{ type: 'text', text: 'Nothing to do.' }];
  const results = toolResults(request);
  const bash = (tool: string, args: unknown): Block => ({ type: 'tool_use', name: 'Bash', input: { command: `ipc tool.invoke.${tool} '${JSON.stringify(args)}'`, description: tool } });
  const reply = (web: boolean): string => `re ${marks.filter((m) => m.web === web).map((m) => `#${m.id}`).join(' ')}`;
  const steps: ((previous: string) => Block)[] = [];
  const first = marks[0];
  if (marks.some((m) => m.kind === 'memory')) steps.push(() => bash('memory_store', { type: 'fact', content: `soak fact of message #${first.id}` }));
  if (marks.some((m) => m.kind === 'approval')) {
    steps.push(() => bash('schedule_recurring_task', { prompt: `water the plants (#${first.id})`, cron: '0 9 * * 1' }));
    // The task's id from the result; without one (refused), a harmless look at the list.
    steps.push((previous) => {
      const id = /task_id\\?":\s*\\?"([^"\\]+)/.exec(previous)?.[1];
      return id ? bash('cancel_task', { task_id: id }) : bash('list_tasks', {});
    });
  }
  if (marks.some((m) => !m.web)) steps.push(() => bash('send_telegram', { recipient: String(CHATS[first.group]), body: reply(false) }));
  if (marks.some((m) => m.web)) steps.push(() => bash('send_webchat', { recipient: 'console', body: reply(true) }));
  const step = steps[results.length];
  return step ? [step(results.at(-1) ?? '')] : [{ type: 'text', text: 'Answered.' }];
}

/** A logged-in console session, as the browser holds it: its cookie and CSRF token. */
async function consoleSession(base: string, token: string): Promise<{ cookie: string; csrf: string }> {
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
  if (login.status !== 204) throw new Error(`console login: ${login.status}`);
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const csrf = ((await (await fetch(`${base}/api/csrf`, { headers: { cookie } })).json()) as { token: string }).token;
  return { cookie, csrf };
}

/** Follows the web chat of `group` as the panel does (its event stream, again when it ends); each agent message to `onAgent`. */
async function followWebChat(base: string, cookie: string, group: string, onAgent: (text: string) => void, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    await followOnce(base, cookie, group, onAgent, signal).catch((err: unknown) => signal.aborted || out(`web chat stream: ${String(err)}`));
    await sleep(1000);
  }
}

async function followOnce(base: string, cookie: string, group: string, onAgent: (text: string) => void, signal: AbortSignal): Promise<void> {
  const res = await fetch(`${base}/plugins/webchat/api/stream?group=${group}`, { headers: { cookie, accept: 'text/event-stream' }, signal });
  if (!res.ok || !res.body) throw new Error(`${res.status}`);
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    const events = buffer.split('\n\n');
    buffer = events.pop() ?? '';
    for (const event of events) {
      const data = event.split('\n').find((l) => l.startsWith('data: '));
      if (!data) continue;
      const message = JSON.parse(data.slice(6)) as { from?: string; text?: string };
      if (message.from === 'agent' && message.text) onAgent(message.text);
    }
  }
}

/** The node process of a compose service: its container's init has it as a child. */
function serviceProcess(project: ComposeProject, service: string, script: string): number {
  const container = project.run(['ps', '-q', service]).trim();
  const init = Number(execFileSync(DOCKER, ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim());
  const found = processTree(init).find((p) => p.cmdline.startsWith('node') && p.cmdline.includes(script));
  if (!found) throw new Error(`no ${script} in ${service}`);
  return found.pid;
}

/** The core's V8 heap in use, the heap V8 holds, and its memory outside the heap (Buffers), from prom-client's default metrics, in MB. */
async function coreHeap(project: ComposeProject): Promise<{ heap: number; heapTotal: number; external: number }> {
  try {
    const res = await fetch(`http://127.0.0.1:${project.port}/metrics`, { headers: { authorization: `Bearer ${project.adminToken()}` }, signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    const metric = (name: string): number => mb(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN));
    return { heap: metric('nodejs_heap_size_used_bytes'), heapTotal: metric('nodejs_heap_size_total_bytes'), external: metric('nodejs_external_memory_bytes') };
  } catch {
    return { heap: NaN, heapTotal: NaN, external: NaN };
  }
}

/** SIGUSR2 to the core (NODE_OPTIONS below): V8 writes a snapshot into the logs folder; copied out. */
async function heapSnapshot(project: ComposeProject, minute: number): Promise<string> {
  const logs = join(project.volumes, 'logs');
  const before = new Set(readdirSync(logs));
  execFileSync(DOCKER, ['kill', '-s', 'USR2', project.run(['ps', '-q', 'core']).trim()]);
  const file = await until(() => readdirSync(logs).find((f) => f.endsWith('.heapsnapshot') && !before.has(f)), 120_000);
  // Complete once its size stops changing.
  for (let size = -1; size !== statSync(join(logs, file)).size; await sleep(2000)) size = statSync(join(logs, file)).size;
  const to = join(OUT, `core-minute-${minute}.heapsnapshot`);
  copyFileSync(join(logs, file), to);
  return to;
}

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const host = bridgeGateway(DOCKER);
  const telegram = await TelegramStandIn.start(BOT_TOKEN, host);
  model.modelKey = MODEL_KEY;
  const modelUrl = await model.start(host);
  // Heap snapshots on a signal, written where the host can read them.
  const override = join(OUT, 'compose.soak.yaml');
  writeFileSync(override, 'services:\n  core:\n    environment:\n      NODE_OPTIONS: "--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=/app/volumes/logs"\n');
  const name = `carapace-soak-${process.pid}`;
  const project = await ComposeProject.create({
    name,
    file: join(ROOT, 'compose.yaml'),
    overrides: [override],
    config: {
      groups: Object.fromEntries(GROUPS.map((g) => [g, {}])),
      agents: { image: AGENT_IMAGE, run_timeout_ms: 120_000 },
      // The stand-in bills conversations as filling a window (SOAK_CONTEXT_KB): no budget may stop the run.
      llm: { budget: { tokens_per_day: 1e12 } },
      plugins: { telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', api_base_url: telegram.url, chats: Object.fromEntries(GROUPS.map((g) => [String(CHATS[g]), g])), owners: [OWNER], poll_timeout_s: 1 } },
    },
    env: { CARAPACE_MODEL_API_URL: modelUrl, ANTHROPIC_API_KEY: MODEL_KEY, TELEGRAM_BOT_TOKEN: BOT_TOKEN },
  });
  const stopStream = new AbortController();
  const cleanUp = async (): Promise<void> => {
    stopStream.abort();
    try {
      project.down();
    } finally {
      const left = execFileSync(DOCKER, ['ps', '-aq', '--filter', `label=carapace.instance=${name}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
      if (left.length > 0) execFileSync(DOCKER, ['rm', '-f', ...left]);
      const storage = new LoopStorage(new DockerRuntime(), { groupsDir: join(project.volumes, 'groups'), instance: name }, { image: AGENT_IMAGE, disk_quota_mb: 2048 });
      for (const g of GROUPS) await storage.destroy(g, true).catch(() => undefined);
      project.removeVolumes();
      await model.stop();
      await telegram.close();
    }
  };
  process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));

  try {
    project.run(['up', '-d', 'core', 'plugins']);
    const ready = (h: Health): boolean => ['telegram', 'memory', 'tasks', 'webchat'].every((p) => h.plugins.healthy.includes(p));
    const health = await project.waitForHealth(ready);
    if (!(health && ready(health))) throw new Error(`the appliance did not become healthy:\n${project.run(['logs', '--tail', '80'])}`);
    const corePid = serviceProcess(project, 'core', 'dist/core/src/main.js');
    const hostPid = serviceProcess(project, 'plugins', 'dist/core/plugin-host/main.js');
    const pluginsRss = (): number => processTree(hostPid).filter((p) => p.cmdline.includes('runner/main.js')).reduce((sum, p) => sum + rssMb(p.pid), 0);

    const base = `http://127.0.0.1:${project.port}`;
    const web = await consoleSession(base, project.adminToken()!);
    const onWeb = (text: string): void => {
      for (const [, id] of text.matchAll(/#(\d+)/g)) answered(Number(id));
    };
    void followWebChat(base, web.cookie, WEB_GROUP, onWeb, stopStream.signal);

    // The Telegram side: replies counted, approval prompts pressed (Approve), the stand-in's records dropped once read.
    const watch = setInterval(() => {
      for (const m of telegram.sent.splice(0)) {
        const approve = m.reply_markup?.inline_keyboard?.[0]?.[0];
        if (approve?.callback_data && m.text.includes('schedule_recurring_task')) {
          telegram.queueCallback({ chatId: m.chat_id, messageId: m.message_id, fromId: OWNER, data: approve.callback_data });
          tally.approved++;
        } else if (m.text.startsWith('re #')) for (const [, id] of m.text.matchAll(/#(\d+)/g)) answered(Number(id));
        else if (/^(The earlier conversation|There was no earlier conversation)/.test(m.text)) tally.cleared++;
        else {
          tally.otherReplies++;
          lastOthers.push(m.text.slice(0, 160));
          if (lastOthers.length > 3) lastOthers.shift();
        }
      }
      for (const list of [telegram.calls, telegram.edits, telegram.callbackAnswers, model.requests]) list.length = 0;
    }, 200);

    // The people: one message every 60/PER_MINUTE s, to the groups in turn.
    let [n, tick, toWebGroup] = [0, 0, 0];
    const perGroup = new Map<string, number>();
    const backlog = (group: string): number => [...waiting.values()].filter((s) => s.group === group).length;
    const write = setInterval(() => {
      for (const [id, s] of waiting) {
        if (Date.now() - s.at < LOST_AFTER_MS) break; // oldest first
        waiting.delete(id);
        tally.lost++;
      }
      const group = GROUPS[tick++ % GROUPS.length];
      if (backlog(group) >= MAX_BACKLOG) {
        tally.heldBack++;
        return;
      }
      n++;
      // Counted per group: each group gets its share of memories and approvals.
      const k = (perGroup.get(group) ?? 0) + 1;
      perGroup.set(group, k);
      const kind: Kind = k % 15 === 0 ? 'approval' : k % 10 === 0 ? 'memory' : 'plain';
      if (kind === 'memory') tally.memories++;
      const viaWeb = group === WEB_GROUP && toWebGroup++ % WEB_EVERY === 0;
      const text = `soak ${kind} #${n} for ${group}${viaWeb ? ' via web' : ''}`;
      waiting.set(n, { group, web: viaWeb, at: Date.now() });
      tally.sent++;
      if (!viaWeb) telegram.queueMessage({ chatId: CHATS[group], text, fromId: OWNER });
      else
        void fetch(`${base}/plugins/webchat/api/send?group=${WEB_GROUP}`, { method: 'POST', headers: { cookie: web.cookie, 'x-csrf-token': web.csrf, 'content-type': 'application/json' }, body: JSON.stringify({ text }) })
          .then((r) => r.status === 202 || out(`web chat send: ${r.status} (counted lost after ${LOST_AFTER_MS / 1000} s)`))
          .catch((err: unknown) => out(`web chat send: ${String(err)}`));
    }, 60_000 / PER_MINUTE);

    // Staggered: one group's conversation at a time.
    let forgets = 0;
    const forget = FORGET_MINUTES > 0 ? setInterval(() => telegram.queueMessage({ chatId: CHATS[GROUPS[forgets++ % GROUPS.length]], text: '/forget', fromId: OWNER }), (FORGET_MINUTES * 60_000) / GROUPS.length) : undefined;

    out(`soak-appliance: ${MINUTES} min, ${GROUPS.length} groups (Telegram each, web chat for ${WEB_GROUP}), ~${PER_MINUTE} messages/min; every 10th a memory, every 15th an approval; ${FORGET_MINUTES > 0 ? `each group's conversation cleared every ${FORGET_MINUTES} min` : 'agents warm throughout'}; agents ${AGENT_IMAGE}`);
    out(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version} here`);
    out('minute  sent answered waiting approved memory other  p50 s  p99 s  core MB heap MB (of) ext MB  host MB plugins MB model KB');
    const rows: { minute: number; core: number; heap: number; heapTotal: number; external: number; host: number; plugins: number }[] = [];
    for (let minute = 1; minute <= MINUTES; minute++) {
      await sleep(60_000);
      const s = stats(latencies);
      const row = { minute, core: rssMb(corePid), ...(await coreHeap(project)), host: rssMb(hostPid), plugins: pluginsRss() };
      rows.push(row);
      const cols = [
        String(minute).padStart(6),
        String(tally.sent).padStart(5),
        String(tally.answered).padStart(8),
        String(waiting.size).padStart(7),
        String(tally.approved).padStart(8),
        String(tally.memories).padStart(6),
        String(tally.otherReplies).padStart(5),
        (s.p50 / 1000).toFixed(1).padStart(6),
        (s.p99 / 1000).toFixed(1).padStart(6),
        row.core.toFixed(1).padStart(8),
        row.heap.toFixed(1).padStart(7),
        `(${row.heapTotal.toFixed(0)})`.padStart(5),
        row.external.toFixed(1).padStart(6),
        row.host.toFixed(1).padStart(8),
        row.plugins.toFixed(1).padStart(10),
        tally.requestKb.toFixed(0).padStart(10),
      ];
      out(cols.join(' '));
      if (tally.otherReplies > 0) out(`        other replies, the last: ${JSON.stringify(lastOthers)}`);
      if (tally.cleared > 0) out(`        ${tally.cleared} conversations cleared (/forget)`);
      if (tally.compactions > 0) out(`        ${tally.compactions} conversations compacted by Claude Code`);
      if (tally.lost > 0) out(`        ${tally.lost} messages unanswered after ${LOST_AFTER_MS / 1000} s: counted lost`);
      if (tally.heldBack > 0) out(`        ${tally.heldBack} messages held back (a group had ${MAX_BACKLOG} unanswered)`);
      Object.assign(tally, { sent: 0, answered: 0, approved: 0, memories: 0, otherReplies: 0, heldBack: 0, lost: 0, cleared: 0, requestKb: 0, compactions: 0 });
      latencies = [];
      if (SNAPSHOT_AT.includes(minute)) out(`        heap snapshot: ${await heapSnapshot(project, minute)}`);
    }
    clearInterval(write);
    clearInterval(forget);
    clearInterval(watch);

    // Each half's slope; the first minute's value is the baseline of the ratios.
    const half = Math.floor(rows.length / 2);
    const summary: Record<string, number> = { minutes: rows.length, unanswered_at_end: waiting.size };
    for (const key of ['core', 'heap', 'heapTotal', 'external', 'host', 'plugins'] as const) {
      const first = rows[0][key];
      summary[`${key}_first_minute_mb`] = r3(first);
      summary[`${key}_last_minute_mb`] = r3(rows[rows.length - 1][key]);
      summary[`${key}_last_vs_first`] = r3(rows[rows.length - 1][key] / first);
      summary[`${key}_slope_first_half`] = r3(slope(rows.slice(0, half).map((r) => [r.minute, r[key]])));
      summary[`${key}_slope_second_half`] = r3(slope(rows.slice(half).map((r) => [r.minute, r[key]])));
      out(`${key.padEnd(8)} ${first.toFixed(1)} → ${rows[rows.length - 1][key].toFixed(1)} MB (×${summary[`${key}_last_vs_first`]}); slope, first half ${summary[`${key}_slope_first_half`]} MB/min, second half ${summary[`${key}_slope_second_half`]} MB/min`);
    }
    out(JSON.stringify(summary));
  } finally {
    await cleanUp();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`soak-appliance: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
