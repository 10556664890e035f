// The core's receipts for plugin events: the plugin host lets a plugin save its progress
// (a Telegram offset) only once the core says it has the event, so the core must say so
// for every event it takes, accepted or refused, and never for one it does not take (it is
// stopping); and a core that restarts must still refuse a repeat of what it accepted. The real core, its
// real sockets, and a plugin host made of raw ZeroMQ sockets, so each step is in the
// test's hands.
import { afterEach, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import { Stack, until } from '../harness.js';
import { parseFrames } from '../../src/boundary/frame-batch.js';
import { parseConfig } from '../../src/config.js';
import { Core } from '../../src/core.js';
import { PROTOCOL_VERSION } from '../../src/protocol/envelope.js';
import { HOST_LINK_VERSION, SOCKETS, type CoreToHost } from '../../src/plugins/host-protocol.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';

const CONFIG = { groups: { family: {} }, plugins: { services: { chats: { c1: 'family' } } } };

/** A plugin host as the core sees one: its link (hello, init, what the core says) and its end of the bus. */
class RawHost {
  readonly dealer = new zmq.Dealer({ linger: 0 });
  readonly bus = new zmq.XPublisher({ linger: 0 });
  readonly said: CoreToHost[] = [];
  private subscribed = false;
  /** When its answer to the core's shutdown may go (the core waits for it). */
  stopAllowed: Promise<void> = Promise.resolve();

  constructor(runDir: string) {
    this.dealer.connect(`ipc://${join(runDir, SOCKETS.pluginHost)}`);
    this.bus.connect(`ipc://${join(runDir, SOCKETS.busIn)}`);
    void (async () => {
      for await (const frames of this.dealer) {
        for (const message of parseFrames<CoreToHost>(frames)) {
          this.said.push(message);
          if (message.t === 'shutdown') await this.stopAllowed.then(() => this.dealer.send(JSON.stringify({ t: 'stopped', results: [] })));
        }
      }
    })().catch(() => undefined);
    void (async () => {
      for await (const [m] of this.bus) this.subscribed = m[0] === 1;
    })().catch(() => undefined);
  }

  async link(): Promise<void> {
    await this.dealer.send(JSON.stringify({ t: 'hello', pid: 4243, version: HOST_LINK_VERSION }));
    await until(() => this.subscribed, 5000);
  }

  /** Its plugin started, on the settings the core's configuration (its answer to hello) gave it. */
  async init(plugin: string): Promise<void> {
    const configuration = await until(() => [...this.said].reverse().find((m) => m.t === 'configuration'), 5000);
    const revision = configuration.t === 'configuration' ? configuration.configuration.plugins[plugin]?.revision : undefined;
    return this.dealer.send(JSON.stringify({ t: 'init', plugin, ok: true, revision }));
  }

  publish(id: string, event: { group?: string; key?: string; body?: string }): Promise<void> {
    const body = { plugin: 'services', group: event.group ?? 'family', payload: { channel: 'services', body: event.body ?? id }, version: PROTOCOL_VERSION, id, ...(event.key ? { key: event.key } : {}) };
    return this.bus.send(['message.inbound', JSON.stringify(body)]);
  }

  receipts(): string[] {
    return this.said.flatMap((m) => (m.t === 'received' ? [m.id] : []));
  }

  close(): void {
    this.dealer.close();
    this.bus.close();
  }
}

let stack: Stack;
let core: Core | null = null;
let host: RawHost | null = null;

/** A core on the stack's folders (a new stack first, unless `again`) and a raw host linked to it; `init`: its plugin said it started. */
async function linked(init: boolean, again = false): Promise<RawHost> {
  if (!again) stack = new Stack({ plugins: ['services'], config: CONFIG });
  core = await startCore();
  host = new RawHost(stack.runDir);
  await host.link();
  if (init) await host.init('services');
  return host;
}

function startCore(): Promise<Core> {
  return Core.start({ runDir: stack.runDir, pluginsDir: stack.pluginsDir, auditFile: stack.auditFile, config: parseConfig(CONFIG), eventKeysFile: join(stack.dir, 'data', 'event-keys.sqlite') });
}

function events(): AuditEntry[] {
  return core!.audit.query({}).filter((e) => e.stage === 'event' && e.source === 'services');
}

afterEach(async () => {
  await core?.stop();
  core = null;
  host?.close();
  host = null;
});

describe('receipts for plugin events', () => {
  it('each event is confirmed at once, accepted or refused, a starting plugin\'s too (it may publish from initialize())', async () => {
    const raw = await linked(false);
    await raw.publish('while starting', { key: 'update 1' });
    await until(() => raw.receipts().length === 1, 5000);
    await raw.init('services');
    await raw.publish('stranger', { group: 'nobody-maps-this' });
    await raw.publish('again', { key: 'update 1' });
    await until(() => raw.receipts().length === 3, 5000);
    expect(raw.receipts()).toEqual(['while starting', 'stranger', 'again']);
    expect(events().map((e) => [e.outcome, e.reason])).toEqual([
      ['routed', 'event accepted'],
      // Kept for a configuration that maps the group (refused-events.test.ts), and confirmed all the same.
      ['pending', expect.stringMatching(/group/)],
      ['dropped', 'a repeat of event update 1, already accepted'],
    ]);
  });

  it('a stopping core takes no event and confirms none: the host keeps it for the next run', async () => {
    const raw = await linked(true);
    let allow!: () => void;
    raw.stopAllowed = new Promise((r) => (allow = r));
    const stopping = core!.stop();
    await until(() => raw.said.some((m) => m.t === 'shutdown'), 5000);
    await raw.publish('during the stop', { key: 'update 2' });
    await until(() => events().length === 1, 5000);
    expect(events()[0]).toMatchObject({ outcome: 'pending', reason: 'not taken while the core stops: the plugin host keeps it for the next run' });
    allow();
    await stopping;
    expect(raw.receipts()).toEqual([]);
  });

  it('a restarted core refuses a repeat of what the last one accepted (by key, or by the host\'s id), and confirms it', async () => {
    const first = await linked(true);
    await first.publish('first', { key: 'update 7' });
    await first.publish('keyless', {});
    await until(() => first.receipts().length === 2, 5000);
    await core!.stop();
    first.close();

    // The receipts were lost with the old core: the host sends both again.
    const raw = await linked(true, true);
    // The new core's Activity starts with the old one's entries (audit-history.ts): only what it decided counts.
    const before = events().length;
    await raw.publish('first-again', { key: 'update 7' });
    await raw.publish('keyless', {});
    await raw.publish('new', { key: 'update 8' });
    await until(() => raw.receipts().length === 3, 5000);
    expect(events().slice(before).map((e) => e.reason)).toEqual(['a repeat of event update 7, already accepted', 'a repeat of event #keyless, already accepted', 'event accepted']);
  });
});
