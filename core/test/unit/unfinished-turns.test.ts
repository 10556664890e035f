// The record of accepted events no turn has finished, on a real SQLite file: what one run
// leaves is what the next one reports, once; a broken file is moved aside.
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_UNFINISHED, notHandledNotice, UnfinishedTurns } from '../../src/agents/unfinished-turns.js';
import { eventEnvelope } from '../../src/protocol/envelope.js';
import Database from 'better-sqlite3';

const message = (group: string, body: string) => eventEnvelope('message.inbound', 'telegram', group, { channel: 'telegram', sender: '1', body });
const fileIn = (): string => join(mkdtempSync(join(tmpdir(), 'carapace-unfinished-')), 'unfinished.sqlite');

describe('UnfinishedTurns', () => {
  it('reports what an earlier run accepted and never finished, once, and never its own', () => {
    const file = fileIn();
    const first = new UnfinishedTurns(file);
    const done = message('family', 'what is the weather');
    const cut = message('family', 'remind me to buy milk at 5pm');
    const other = message('work', 'x'.repeat(500));
    for (const e of [done, cut, other]) first.accept(e);
    first.finish(done.id);
    expect(first.takeLeftovers()).toEqual([]); // its own turns are still running
    first.close(); // the "crash": nothing else is written

    const second = new UnfinishedTurns(file);
    second.accept(message('family', 'a message of the new run'));
    const left = second.takeLeftovers();
    expect(left.map((t) => [t.id, t.group, t.preview])).toEqual([
      [cut.id, 'family', 'remind me to buy milk at 5pm'],
      [other.id, 'work', `${'x'.repeat(79)}…`],
    ]);
    expect(second.takeLeftovers()).toEqual([]);
    second.close();
    // A third run: neither the reported ones again nor the second run's own is lost.
    const third = new UnfinishedTurns(file);
    expect(third.takeLeftovers().map((t) => t.preview)).toEqual(['a message of the new run']);
    third.close();
  });

  it('keeps at most MAX_UNFINISHED rows, dropping the oldest', () => {
    const file = fileIn();
    const store = new UnfinishedTurns(file);
    const events = Array.from({ length: MAX_UNFINISHED + 3 }, (_, i) => message('family', `m${i}`));
    for (const e of events) store.accept(e);
    store.close();
    const next = new UnfinishedTurns(file);
    const left = next.takeLeftovers();
    expect(left).toHaveLength(MAX_UNFINISHED);
    expect(left[0].preview).toBe('m3');
    next.close();
  });

  it('moves a corrupt file aside, says so, and starts empty', () => {
    const file = fileIn();
    writeFileSync(file, 'this is not a database'.repeat(100));
    const problems: string[] = [];
    const store = new UnfinishedTurns(file, (p) => problems.push(p.movedTo));
    expect(problems).toHaveLength(1);
    expect(readdirSync(join(file, '..')).some((f) => f.startsWith('unfinished.sqlite.corrupt-'))).toBe(true);
    expect(store.takeLeftovers()).toEqual([]);
    store.close();
  });

  it('tells the person what was not handled, at most five previews and a count', () => {
    const turns = Array.from({ length: 7 }, (_, i) => ({ id: `${i}`, group: 'g', topic: 'message.inbound', source: 'telegram', preview: `m${i}`, accepted_at: '2026-11-24T02:50:00.000Z', replied: false }));
    const text = notHandledNotice(turns);
    expect(text).toContain('"m4" (2026-11-24 02:50 UTC)');
    expect(text).not.toContain('"m5"');
    expect(text).toContain('and 2 more.');
    expect(notHandledNotice(turns.slice(0, 1))).toMatch(/^Carapace restarted before it finished this, so it was not handled/);
  });

  // Issue 22: a reply went out, then the core was killed before the turn ended. The notice
  // must not say "not handled" of a message the person saw answered.
  it('a turn whose reply reached the person before the crash is not called "not handled"', () => {
    const file = fileIn();
    const first = new UnfinishedTurns(file);
    const answered = message('family', 'book the table for friday');
    const silent = message('family', 'and the cinema');
    first.accept(answered);
    first.accept(silent);
    first.replied(answered.id);
    first.close();
    const second = new UnfinishedTurns(file);
    const left = second.takeLeftovers();
    expect(left.map((t) => [t.preview, t.replied])).toEqual([['book the table for friday', true], ['and the cinema', false]]);
    const text = notHandledNotice(left);
    const [notHandled, gotReply] = text.split('Carapace restarted while');
    expect(notHandled).toContain('"and the cinema"');
    expect(notHandled).not.toContain('book the table');
    expect(gotReply).toContain('you got its reply');
    expect(gotReply).toContain('"book the table for friday"');
    expect(notHandledNotice(left.slice(0, 1))).not.toMatch(/not handled/);
    second.close();
  });

  it('a file from before replies were recorded opens, its rows read as not replied', () => {
    const file = fileIn();
    const old = new UnfinishedTurns(file);
    old.accept(message('family', 'old row'));
    old.close();
    const raw = new (Database as unknown as new (f: string) => { exec(sql: string): void; close(): void })(file);
    raw.exec('CREATE TABLE t AS SELECT seq, id, boot, grp, topic, source, preview, accepted_at FROM unfinished; DROP TABLE unfinished; ALTER TABLE t RENAME TO unfinished; PRAGMA user_version = 0;');
    raw.close();
    const next = new UnfinishedTurns(file);
    expect(next.takeLeftovers().map((t) => [t.preview, t.replied])).toEqual([['old row', false]]);
    next.close();
  });
});
