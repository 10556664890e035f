// Upgrading keeps everything (DESIGN 18): today's core and plugin host, real processes, on
// the volumes the 2026-11-24 release left (core/test/fixtures/upgrade/2026-11-24, written by
// that release's own stores: make-2026-11-24.mjs). Everything a person could see before is
// seen after; every older file is migrated once and Activity says so; a second start
// migrates nothing; the console's login is the same. The 2026-11-28 release: upgrade-labels.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from '../harness.js';
import { Installation } from '../support/installation.js';

let at: Installation;
const reasons = async (): Promise<string[]> => (await at.activity()).map((e) => e.reason ?? '');
const migrations = async (): Promise<string[]> => (await reasons()).filter((r) => r.includes('migrated from format version'));

beforeAll(async () => {
  at = await Installation.upgrade('2026-11-24');
}, 60_000);

afterAll(async () => {
  await at?.remove();
}, 60_000);

describe('an installation of the 2026-11-24 release, upgraded', () => {
  it('logs in with the token it had', async () => {
    expect(readFileSync(join(at.dir, 'data', 'admin-token'), 'utf8')).toBe(readFileSync(join(at.fixture, 'data', 'admin-token'), 'utf8'));
    expect(await at.logIn()).toBe(204);
  });

  it('shows the Activity from before the upgrade', async () => {
    const said = await reasons();
    expect(said).toContain('core started (the 2026-11-24 release)');
    expect(said).toContain('stored a memory before the upgrade');
  });

  it('migrated every older file once, and Activity says which', async () => {
    let migrated: string[] = [];
    const said = await eventually(async () => {
      migrated = await migrations();
      // The plugins' files are migrated as each plugin starts (Telegram, with no bot token here, does not).
      return migrated.length >= 4 ? migrated : undefined;
    }, 20_000).catch((err: unknown) => {
      throw new Error(`${String(err)}: Activity said ${JSON.stringify(migrated)}; the host said:\n${at.hostOutput}`);
    });
    for (const file of ['llm/usage.sqlite migrated from format version 0 to 1', 'unfinished-turns.sqlite migrated from format version 0 to 1', 'webchat/history.json migrated from format version 0 to 1', 'memory/main.sqlite migrated from format version 2 to 3']) {
      expect(said.some((reason) => reason.includes(file))).toBe(true);
    }
    // Written in today's format: read by today's code from now on.
    expect(JSON.parse(readFileSync(join(at.dir, 'data/plugins/webchat/history.json'), 'utf8'))).toMatchObject({ version: 1, groups: { main: [{ text: 'Remember that the boat trip is on Saturday' }, { from: 'agent' }] } });
  });

  it('keeps the usage, its cost said as never recorded rather than $0.00', () => {
    const db = new Database(join(at.dir, 'data/llm/usage.sqlite'), { readonly: true });
    try {
      expect(db.prepare("SELECT day, input_tokens, output_tokens, cost_micros, unpriced_tokens, requests FROM usage WHERE day < '2026-11-25' ORDER BY day").all()).toEqual([
        { day: '2026-11-22', input_tokens: 12000, output_tokens: 800, cost_micros: 0, unpriced_tokens: 12800, requests: 1 },
        { day: '2026-11-24', input_tokens: 30000, output_tokens: 2100, cost_micros: 0, unpriced_tokens: 32100, requests: 1 },
      ]);
    } finally {
      db.close();
    }
  });

  it('keeps the chat, the memory, the task, the standing approval and the paired chat', async () => {
    const chat = await at.panel<{ messages: { text: string }[] }>('webchat', 'history?group=main');
    expect(chat.messages.map((m) => m.text)).toEqual(['Remember that the boat trip is on Saturday', 'Noted: the boat trip is on Saturday.']);
    const memory = await at.panel<{ results: { content: string }[] }>('memory', 'search?group=main&q=boat');
    expect(memory.results.map((r) => r.content)).toEqual(['The boat trip is on Saturday at the marina']);
    const tasks = await at.panel<{ tasks: { task_id: string }[] }>('tasks', 'tasks?group=main');
    expect(tasks.tasks.map((t) => t.task_id)).toEqual(['morning-brief']);
    const { standing } = await at.api<{ standing: { tool: string; group: string }[] }>('/api/confirmations');
    expect(standing).toEqual([expect.objectContaining({ tool: 'send_telegram_message', group: 'main' })]);
    const { chats } = await at.api<{ chats: { plugin: string; chat: string; group: string }[] }>('/api/groups');
    expect(chats).toContainEqual(expect.objectContaining({ plugin: 'telegram', chat: '4242', group: 'main' }));
  });

  it('says since when the conversation is kept, not just "0 messages"', async () => {
    const convo = await at.api<{ messages: unknown[]; kept_since: string }>('/api/conversation/main');
    expect(convo.messages).toEqual([]);
    expect(Date.parse(convo.kept_since)).toBeGreaterThan(Date.parse('2026-11-25'));
  });

  it('a second start migrates nothing', async () => {
    const before = (await migrations()).length;
    await at.down();
    await at.up();
    expect(await at.logIn()).toBe(204);
    // Every plugin started again (its stores opened) before counting.
    await at.panel('memory', 'search?group=main&q=boat');
    await at.panel('webchat', 'history?group=main');
    expect((await migrations()).length).toBe(before);
  }, 90_000);
});
