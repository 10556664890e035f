// A hostile session floods its socket with rejections (unknown topics, bad JSON, schema
// failures, each with its own topic and correlation) over raw ZeroMQ, with one real call
// in the middle. The audit file stays small: each kind of rejection is written whole
// once a summary window, the rest of the window counted in one summary line; the real
// call is audited in full. The flood spans two windows on purpose (under load on CI it did
// anyway): every request is counted once, across all of them.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as zmq from 'zeromq';
import { sleep, Stack, UNGUARDED_SESSIONS, until } from '../harness.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import type { Session } from '../../src/boundary/session-table.js';

let stack: Stack;
let session: Session;
let dealer: zmq.Dealer;

beforeAll(async () => {
  stack = await Stack.start({
    plugins: ['echo'],
    // The session guard would refuse (and quarantine) such a flood long before this: its
    // budget is raised so the rejections reach the stages whose audit is summarised.
    config: {
      rate_limit: { per_minute: 1_000_000, burst: 100_000 },
      audit: { repeat_window_s: WINDOW_S },
      sessions: UNGUARDED_SESSIONS,
    },
  });
  session = await stack.openSession('family');
  dealer = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
  dealer.connect(`ipc://${session.socketPath}`);
});

afterAll(async () => {
  dealer?.close();
  await stack?.stop();
});

const WINDOW_S = 2;
const PER_KIND = 1000;
const KINDS = {
  unknown: (i: number) => JSON.stringify({ topic: `tool.invoke.nope${i}`, correlation: `u-${i}`, arguments: {} }),
  json: (i: number) => `{"topic":"tool.invoke.x${i}",`,
  schema: (i: number) => JSON.stringify({ topic: 'tool.invoke.echo', correlation: `s-${i}`, arguments: { text: i } }),
};

describe('a flood of rejections from one session', () => {
  it('writes a bounded number of lines, summarises the rest, and audits the real call in full', async () => {
    const total = PER_KIND * 3 + 1;
    const sending = (async () => {
      for (let i = 0; i < PER_KIND; i++) {
        await dealer.send(KINDS.unknown(i));
        await dealer.send(KINDS.json(i));
        await dealer.send(KINDS.schema(i));
        if (i === PER_KIND / 2) {
          await dealer.send(JSON.stringify({ topic: 'tool.invoke.echo', correlation: 'real-call', arguments: { text: 'hello' } }));
          // The second half in another summary window.
          await sleep(WINDOW_S * 1000 + 500);
        }
      }
    })();
    let real: any = null;
    for (let seen = 0; seen < total; seen++) {
      const reply = JSON.parse((await dealer.receive()).at(-1)!.toString('utf8'));
      if (reply.correlation === 'real-call') real = reply;
    }
    await sending;
    expect(real.payload.error).toBeNull();
    expect(real.payload.result.echoed.text).toBe('hello');

    // What the audit holds for one kind: its whole entries (one opens each window) and its summaries (one closes each).
    const KEYS = ['topic UNKNOWN_TOOL', 'envelope VALIDATION_FAILED', 'payload VALIDATION_FAILED'];
    const isSummary = (e: AuditEntry): boolean => e.session === session.id && typeof e.repeats === 'number';
    const ofKind = (entries: AuditEntry[], key: string): { whole: AuditEntry[]; summaries: AuditEntry[] } => {
      const [stage, code] = key.split(' ');
      const kind = entries.filter((e) => e.session === session.id && e.stage === stage && e.code === code && e.outcome === 'rejected');
      return { whole: kind.filter((e) => e.repeats === undefined), summaries: kind.filter(isSummary) };
    };
    const counted = (entries: AuditEntry[], key: string): number => {
      const { whole, summaries } = ofKind(entries, key);
      return whole.length + summaries.reduce((n, e) => n + (e.repeats ?? 0), 0);
    };
    // Every window closes within repeat_window_s (+1 s sweep); a count that never comes is asserted below, with its numbers.
    await until(() => KEYS.every((key) => counted(stack.core.audit.query({ session: session.id }), key) >= PER_KIND), 15_000).catch(() => undefined);
    const lines = (await stack.auditText()).trim().split('\n');
    const entries = lines.map((l) => JSON.parse(l) as AuditEntry);
    const mine = entries.filter((e) => e.session === session.id);

    // Bounded: a handful of lines per kind and window, not thousands.
    expect(mine.length).toBeLessThan(40);

    // Each kind: whole ones plus those counted in every window are every request of this kind, each once.
    for (const key of KEYS) {
      const { summaries } = ofKind(mine, key);
      expect({ key, counted: counted(mine, key) }).toEqual({ key, counted: PER_KIND });
      expect({ key, windows: summaries.length >= 2 }).toEqual({ key, windows: true });
      for (const summary of summaries) {
        expect(summary.reason).toMatch(/^\d+ more like this in 2 s$/);
        expect(summary.samples?.length).toBeGreaterThan(0);
        expect(summary.samples?.length).toBeLessThanOrEqual(5);
      }
    }
    const byKey = new Map(mine.filter(isSummary).map((e) => [`${e.stage} ${e.code}`, e]));
    expect(byKey.get('topic UNKNOWN_TOOL')?.samples?.[0]).toMatch(/^tool\.invoke\.nope\d+$/);

    // The real call: every stage, in order.
    const call = entries.filter((e) => e.correlation === 'real-call').map((e) => `${e.stage}:${e.outcome}`);
    expect(call).toEqual(['envelope:passed', 'topic:passed', 'payload:passed', 'authorize:passed', 'route:routed', 'response:ok']);

    // The in-memory window holds what the file holds.
    const window = stack.core.audit.query({ session: session.id });
    expect(window.map((e) => JSON.stringify({ ...e }))).toEqual(mine.map((e) => JSON.stringify(strip(e))));
  }, 60_000);

  it('summarises open bursts at shutdown', async () => {
    const other = await stack.openSession('other');
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 10_000 });
    d.connect(`ipc://${other.socketPath}`);
    for (let i = 0; i < 20; i++) await d.send(KINDS.unknown(i));
    for (let i = 0; i < 20; i++) await d.receive();
    d.close();
    await stack.core.stop();
    const entries = (await stack.auditEntries()).filter((e) => e.session === other.id);
    const summary = entries.find((e) => e.repeats !== undefined);
    expect(summary?.repeats).toBe(19);
    expect(summary?.code).toBe('UNKNOWN_TOOL');
  }, 30_000);
});

/** A file line without pino's level, as the window holds it. */
function strip(e: AuditEntry & { level?: string }): AuditEntry {
  const { level: _level, ...rest } = e;
  return rest;
}
