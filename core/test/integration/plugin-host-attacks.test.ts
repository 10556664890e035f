// The plugin host attacked from a plugin's own process, as hostile code there could: the
// `saboteur` fixture writes to the host's channel what no runner would (garbage, 200 MB,
// nesting 100 000 deep, unknown and malformed messages), floods it, stops reading it, leaves
// processes behind, and takes all the memory it can. The host (root, every plugin's
// supervisor) must stay up, small, and answering for the others; the plugin is ended with
// the reason said and audited. Real plugin host, real processes; as root (here and in CI)
// each plugin runs as a uid of its own.
import { afterEach, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { Stack, until, UNGUARDED_SESSIONS } from '../harness.js';
import type { Session } from '../../src/boundary/session-table.js';
import { processesOf } from '../../plugin-host/isolation.js';

const asRoot = process.getuid?.() === 0;
const itAsRoot = asRoot ? it : it.skip;

let stack: Stack | null = null;
let family: Session;

async function start(): Promise<Stack> {
  stack = await Stack.start({ plugins: ['echo', 'saboteur'], config: { groups: { family: {} }, sessions: UNGUARDED_SESSIONS } });
  family = await stack.openSession('family');
  return stack;
}

afterEach(async () => {
  await stack?.stop();
  stack = null;
});

/** The host's resident memory now and at its peak (VmHWM), in MB. */
function hostMemory(s: Stack): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${s.host!.pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Echo answers; how long it took (ms). */
async function echoMs(s: Stack, text: string): Promise<number> {
  const started = Date.now();
  expect((await s.ipc(family, 'tool.invoke.echo', { text })).out?.echoed?.text).toBe(text);
  return Date.now() - started;
}

/** Echo answers, and within a second. */
async function othersAnswer(s: Stack, text: string): Promise<void> {
  expect(await echoMs(s, text)).toBeLessThan(1000);
}

/** What the Overview says of the saboteur once its process is down, matching `pattern`. */
function downBecause(s: Stack, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  return until(() => {
    const detail = s.core.catalog.states().find((p) => p.name === 'saboteur')?.detail ?? '';
    return pattern.test(detail) ? detail : undefined;
  }, timeoutMs);
}

describe('what a plugin writes to the host is bounded', () => {
  it.each([
    ['garbage', /MALFORMED_MESSAGE: it sent a line that is not JSON/],
    ['huge', /MESSAGE_TOO_LARGE: it sent a message over 8388608 bytes/],
    ['big_publish', /MESSAGE_TOO_LARGE/],
    ['deep', /MALFORMED_MESSAGE: .*nested deeper than 64/],
    ['unknown_t', /MALFORMED_MESSAGE: .*unknown message type "launch"/],
    ['bad_rid', /MALFORMED_MESSAGE: .*"response" message: \/rid must be string/],
    ['topic_object', /MALFORMED_MESSAGE: .*"publish" message: \/topic must be string/],
  ])('%s: refused, its process killed with the reason, audited; the host stays up and small', async (kind, reason) => {
    const s = await start();
    const before = hostMemory(s);
    const answer = await s.ipc(family, 'tool.invoke.sab_attack', { kind }, { timeoutMs: 30_000 });
    // Its answer came on its request lane before the host killed it, or it was killed
    // holding the request (whether it acted is then unknown): nothing else.
    expect(answer.code === 0 || answer.err?.code === 'RESULT_UNKNOWN').toBe(true);
    const detail = await downBecause(s, reason);
    // Killed, or gone first on its own when the host closed its channel.
    expect(detail).toMatch(/; (killed by SIGKILL|exited with code 0)\); starting it again$/);
    expect(s.host?.exitCode).toBeNull();
    await othersAnswer(s, `after ${kind}`);
    // 200 MB sent; the host held at most its bound of one message (8 MB) at a time.
    expect(hostMemory(s).peak - before.rss).toBeLessThan(64);
    const audit = await s.auditEntries();
    expect(audit.find((e) => e.source === 'saboteur' && e.severity === 'CRITICAL' && reason.test(e.reason ?? ''))).toBeDefined();
    expect(audit.find((e) => e.source === 'saboteur' && /the process of plugin "saboteur" ended \(.*(MALFORMED_MESSAGE|MESSAGE_TOO_LARGE)/.test(e.reason ?? ''))).toBeDefined();
    // Counted as a crash: it comes back (after its back-off).
    await until(() => s.core.catalog.state('saboteur') === 'healthy', 10_000);
    expect((await s.ipc(family, 'tool.invoke.sab_whoami', {})).code).toBe(0);
  }, 60_000);
});

describe('a plugin that floods the host is throttled', () => {
  it.each(['publish', 'service'])('100 000 %s messages as fast as it can: the others answer within a second, the host stays small, the throttling is audited', async (kind) => {
    const s = await start();
    const before = hostMemory(s);
    expect((await s.ipc(family, 'tool.invoke.sab_flood', { kind, count: 100_000 })).out).toEqual({ queued: 100_000 });
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      waits.push(await echoMs(s, `during the flood ${i}`));
      await new Promise((r) => setTimeout(r, 300));
    }
    // Within a second, judged by the median: one call may meet a busy machine (a clean CI
    // run beside other Docker work saw 2.4 s once); none waits for the flood to drain.
    waits.sort((a, b) => a - b);
    expect(waits[2]).toBeLessThan(1000);
    expect(waits[4]).toBeLessThan(5000);
    // Throttled, the host grew 10 (publish) and 52 MB (service) on a quiet machine, 68 in a
    // CI run beside Docker work; with the throttle removed, 121 and 913 MB.
    expect(hostMemory(s).peak - before.rss).toBeLessThan(96);
    const audit = await s.auditEntries();
    expect(audit.find((e) => e.source === 'saboteur' && e.severity === 'CRITICAL' && /sends more than 500 messages a second: throttled/.test(e.reason ?? ''))).toBeDefined();
    expect(s.host?.exitCode).toBeNull();
  }, 60_000);
});

describe('a plugin that never reads', () => {
  it('is not queued for without end: killed with the reason, its request ends unknown or timed out, the host stays small', async () => {
    const s = await start();
    const before = hostMemory(s);
    // 20 000 tool catalogs asked for and never read (the host's answers would pile up in its memory).
    expect((await s.ipc(family, 'tool.invoke.sab_deaf', { calls: 20_000 })).out).toEqual({ deaf: true });
    await new Promise((r) => setTimeout(r, 300));
    // A request on its lane (which it still reads) is answered; one through the host ends unknown or timed out.
    const unheard = await s.ipc(family, 'tool.invoke.sab_whoami', {}, { timeoutMs: 60_000 });
    expect(['answered', 'RESULT_UNKNOWN', 'PLUGIN_TIMEOUT']).toContain(unheard.code === 0 ? 'answered' : unheard.err?.code);
    await downBecause(s, /UNREAD_BACKLOG: it left more than 16777216 bytes of the host's messages unread|no heartbeat/, 30_000);
    await othersAnswer(s, 'after the deaf one');
    // The host's peak grows by 58 MB here on a quiet machine (16 MB left unread, the answers
    // made and dropped meanwhile), 72 MB in a CI run beside Docker tests; without the bound
    // on what is left unread the plugin is never killed for it (downBecause fails above).
    expect(hostMemory(s).peak - before.rss).toBeLessThan(96);
    expect(s.host?.exitCode).toBeNull();
  }, 90_000);
});

describe('nothing of a plugin outlives it', () => {
  itAsRoot('a detached grandchild and a double fork end when its process is killed, and none of its uid is left when the host stops', async () => {
    const s = await start();
    const { uid, pid, detached } = (await s.ipc(family, 'tool.invoke.sab_orphans', {})).out as { uid: number; pid: number; detached: number };
    // Itself, the detached child and the double-forked one.
    await until(() => processesOf(uid).length >= 3 || undefined, 5000);
    process.kill(pid, 'SIGKILL');
    await until(() => s.core.catalog.state('saboteur') === 'starting', 5000);
    await until(() => s.core.catalog.state('saboteur') === 'healthy', 10_000);
    const again = (await s.ipc(family, 'tool.invoke.sab_whoami', {})).out as { pid: number };
    expect(processesOf(uid)).toEqual([again.pid]);
    expect(processesOf(uid)).not.toContain(detached);
    await s.ipc(family, 'tool.invoke.sab_orphans', {});
    await until(() => processesOf(uid).length >= 3 || undefined, 5000);
    await s.stop();
    stack = null;
    expect(processesOf(uid)).toEqual([]);
  }, 60_000);
});

describe('its memory is its own', () => {
  it('Buffers outside the heap are bounded too: past 1 GB its allocation fails in its own process', async () => {
    const s = await start();
    const hog = (await s.ipc(family, 'tool.invoke.sab_hog', { kind: 'buffer' }, { timeoutMs: 60_000 })).out as { mb: number; error: string | null };
    expect(hog.mb).toBeLessThan(1024);
    expect(hog.error).toMatch(/allocation failed/i);
    await othersAnswer(s, 'after the hog');
    expect((await s.ipc(family, 'tool.invoke.sab_whoami', {})).code).toBe(0);
  }, 60_000);

  it('a heap that runs out ends only its process: the others answer meanwhile, it comes back', async () => {
    const s = await start();
    const dying = s.ipc(family, 'tool.invoke.sab_hog', { kind: 'heap' }, { timeoutMs: 60_000 });
    await othersAnswer(s, 'while it eats');
    expect((await dying).err).toMatchObject({ code: 'RESULT_UNKNOWN' });
    await downBecause(s, /killed by SIGABRT|exited with code/);
    await othersAnswer(s, 'after it died');
    await until(() => s.core.catalog.state('saboteur') === 'healthy', 10_000);
    expect((await s.ipc(family, 'tool.invoke.sab_whoami', {})).code).toBe(0);
    expect(s.host?.exitCode).toBeNull();
  }, 60_000);
});
