// Every stored format carries a version (DESIGN 18): an older file is migrated once (and
// Activity hears of it once), a newer one is refused whole, untouched, with a clear error.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnfinishedTurns } from '../../src/agents/unfinished-turns.js';
import { WorkspaceLabels } from '../../src/agents/workspace-labels.js';
import { HeldEvents } from '../../src/bus/held-events.js';
import { SeenKeys } from '../../src/bus/seen-keys.js';
import { StandingApprovals } from '../../src/confirm/standing-approvals.js';
import { ConversationStore } from '../../src/conversation/conversation-store.js';
import { UsageStore } from '../../src/llm/usage-store.js';
import { onMigration, type FormatMigration } from '../../src/state/format-migrations.js';
import { StoreTooNewError } from '../../src/state/json-state.js';
import { readVersionedJson } from '../../src/state/versioned-json.js';
import { PluginIds } from '../../plugin-host/isolation.js';
import { ChatHistory } from '../../../plugins/webchat/history.js';
import { OffsetStore } from '../../../plugins/telegram/offset-store.js';
import { PromptLedger } from '../../../plugins/telegram/prompt-ledger.js';
import { FiledReports } from '../../../plugins/github-bugs/filed-reports.js';
import { RecentMail } from '../../../plugins/email/recent-mail.js';
import { SyncState } from '../../../plugins/email/sync-state.js';
import { TaskStore } from '../../../plugins/tasks/store.js';
import { LabelledUids } from '../../sdk/labelled-uids.js';

let dir: string;
let heard: FormatMigration[];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cp-formats-'));
  heard = [];
  onMigration((m) => heard.push(m));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const settings = { keep_messages: 50, keep_kb: 256, keep_days: 30, brief_messages: 20, brief_chars: 8000 };

describe('a JSON state file', () => {
  const format = { migrations: [(json: unknown) => ({ items: json })], read: (json: unknown) => (json as { items: string[] }).items };

  it('from before versions is migrated when read, written back at once, and said once', () => {
    const file = join(dir, 'state.json');
    writeFileSync(file, JSON.stringify(['a', 'b']));
    expect(readVersionedJson(file, format)).toEqual({ kind: 'loaded', value: ['a', 'b'] });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, items: ['a', 'b'] });
    expect(heard).toEqual([{ file, from: 0, to: 1 }]);
    expect(readVersionedJson(file, format)).toEqual({ kind: 'loaded', value: ['a', 'b'] });
    expect(heard).toHaveLength(1);
  });

  it('from a newer version is refused whole and left as it was', () => {
    const file = join(dir, 'state.json');
    const text = JSON.stringify({ version: 2, items: ['x'], more: true });
    writeFileSync(file, text);
    expect(() => readVersionedJson(file, format)).toThrow(/has format version 2, newer than the 1 this Carapace knows/);
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(heard).toEqual([]);
  });
});

describe('a SQLite store', () => {
  it('from before versions is migrated once and said once; a fresh one is not news', () => {
    const file = join(dir, 'llm', 'usage.sqlite');
    mkdirSync(join(dir, 'llm'));
    // As the 2026-11-24 release made it: tokens, no cost.
    const old = new Database(file);
    old.exec(`CREATE TABLE usage (grp TEXT NOT NULL, day TEXT NOT NULL, input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (grp, day));
      INSERT INTO usage VALUES ('main', '2026-11-24', 3000, 200, 4);`);
    old.close();
    const usage = new UsageStore(file);
    // Never priced: its cost was not recorded, which is not $0.
    expect(usage.get('main', '2026-11-24')).toMatchObject({ input_tokens: 3000, output_tokens: 200, cost_micros: 0, unpriced_tokens: 3200, requests: 4 });
    usage.addUsage('main', '2026-11-27', { input: 10, output: 5, micros: 40 });
    expect(usage.get('main', '2026-11-27')).toMatchObject({ cost_micros: 40, unpriced_tokens: 0 });
    usage.close();
    expect(heard).toEqual([{ file, from: 0, to: 1 }]);
    new UsageStore(file).close();
    new UsageStore(join(dir, 'fresh.sqlite')).close();
    expect(heard).toHaveLength(1);
  });

  it('keeps its conversation since when it first kept one', () => {
    const store = new ConversationStore(join(dir, 'conversation.sqlite'), settings);
    const since = store.keptSince();
    expect(Math.abs(since - Date.now())).toBeLessThan(60_000);
  });
});

describe('every stored format refuses a file a newer Carapace wrote', () => {
  const newerDb = (file: string): void => {
    const db = new Database(file);
    db.exec('CREATE TABLE future (x INTEGER)');
    db.pragma('user_version = 99');
    db.close();
  };
  const newerJson = (file: string): string => {
    const text = JSON.stringify({ version: 99, from: 'the future', uids: {} });
    writeFileSync(file, text);
    return text;
  };
  const sqliteStores: Array<[string, (file: string) => unknown]> = [
    ['usage', (f) => new UsageStore(f)],
    ['unfinished turns', (f) => new UnfinishedTurns(f)],
    ['event keys', (f) => new SeenKeys(10, f)],
    ['held events', (f) => new HeldEvents(f)],
    ['conversation', (f) => new ConversationStore(f, settings)],
  ];
  it.each(sqliteStores)('%s (SQLite)', (_name, open) => {
    const file = join(dir, 'store.sqlite');
    newerDb(file);
    expect(() => open(file)).toThrow(StoreTooNewError);
    const db = new Database(file, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(99);
    db.close();
  });

  const jsonStores: Array<[string, string, (dir: string, file: string) => unknown]> = [
    ['standing approvals', 'approvals.json', (_d, f) => new StandingApprovals(f)],
    ['workspace labels', 'labels.json', (_d, f) => new WorkspaceLabels(f)],
    ['web chat history', 'history.json', (d) => new ChatHistory(d, 10, { corrupt: () => undefined, saveFailed: () => undefined }).close()],
    ['telegram offset', 'offset.json', (d) => new OffsetStore(d).load()],
    ['telegram prompts', 'prompts.json', (d) => new PromptLedger(d, 10).load()],
    ['filed bug reports', 'filed.json', (_d, f) => new FiledReports(f)],
    ['recent mail', 'recent-mail.json', (d) => new RecentMail(d).load([])],
    ['mail sync state', 'sync.json', (d) => new SyncState(d).load()],
    ['plugin uids', '.uids.json', (d) => new PluginIds(d)],
    ['labelled calendar entries', 'labelled-entries.json', (d) => new LabelledUids(d).load()],
  ];
  it.each(jsonStores)('%s (JSON)', async (_name, name, open) => {
    const file = join(dir, name);
    const text = newerJson(file);
    await expect(Promise.resolve().then(() => open(dir, file))).rejects.toThrow(StoreTooNewError);
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(existsSync(file)).toBe(true);
  });

  it('scheduled tasks (JSON)', async () => {
    writeFileSync(join(dir, 'tasks.json'), JSON.stringify({ version: 99, tasks: [] }));
    await expect(new TaskStore(dir).load()).rejects.toThrow(/newer than the 1 this Carapace knows/);
  });
});
