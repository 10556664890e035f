// Messages held for a configuration that does not allow them do not wait for ever: the
// person may let a plugin's go (the Overview's "Discard them"), and those kept past 30 days
// go by themselves when the core starts (and every hour), each said in Activity. A real
// SQLite file; the catalog and the audit log as the intake sees them.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import { EventIntake, type EventIntakeDeps } from '../../src/bus/event-intake.js';
import { HeldEvents, MAX_HELD_DAYS } from '../../src/bus/held-events.js';

let dir: string;
let file: string;
let audited: Partial<AuditEntry>[];
let refusing: Map<string, string | null>;
const event = (group: string, body: string) => ({ plugin: 'chat', group, version: 1, key: body, payload: { body } });

function intake(): EventIntake {
  const catalog = { pluginNames: () => ['chat', 'other'], setRefusing: (plugin: string, why: string | null) => refusing.set(plugin, why) };
  const audit = { record: (entry: Partial<AuditEntry>) => void audited.push(entry) };
  return new EventIntake({ catalog, audit, held: new HeldEvents(file) } as unknown as EventIntakeDeps);
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cp-held-'));
  file = join(dir, 'held-events.sqlite');
  audited = [];
  refusing = new Map();
  const held = new HeldEvents(file);
  held.hold('chat', 'old', 'message.inbound', event('friends', 'from last month'), 'group "friends" is not mapped');
  held.hold('chat', 'new', 'message.inbound', event('friends', 'from today'), 'group "friends" is not mapped');
  held.hold('other', 'o', 'message.inbound', event('friends', 'another plugin'), 'group "friends" is not mapped');
  held.close();
  const db = new Database(file);
  db.prepare("UPDATE held SET at = ? WHERE name = 'old'").run(new Date(Date.now() - (MAX_HELD_DAYS + 1) * 86_400_000).toISOString());
  db.close();
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('held messages', () => {
  it(`kept past ${MAX_HELD_DAYS} days go when the core starts, each said; the newer ones stay`, () => {
    const started = intake();
    try {
      expect(audited).toEqual([expect.objectContaining({ source: 'chat', group: 'friends', outcome: 'dropped', reason: expect.stringMatching(/^held since .*: no configuration allowed it within 30 days, never handled$/) })]);
      expect(refusing.get('chat')).toMatch(/^1 message was not handled/);
      expect(refusing.get('other')).toMatch(/^1 message was not handled/);
    } finally {
      started.close();
    }
    const db = new Database(file, { readonly: true });
    expect(db.prepare('SELECT name FROM held ORDER BY seq').all()).toEqual([{ name: 'new' }, { name: 'o' }]);
    db.close();
  });

  it("discarded by the person: that plugin's go, each said, its red state clears, another plugin's stay", () => {
    const started = intake();
    audited = [];
    try {
      expect(started.discard('chat', 'console')).toBe(1);
      expect(audited).toEqual([expect.objectContaining({ source: 'chat', outcome: 'dropped', reason: expect.stringMatching(/: discarded by console, never handled$/) })]);
      expect(refusing.get('chat')).toBeNull();
      expect(refusing.get('other')).toMatch(/^1 message was not handled/);
      expect(started.discard('chat', 'console')).toBe(0);
    } finally {
      started.close();
    }
    // Gone from the file too: a restarted core does not show them again.
    const reopened = new HeldEvents(file);
    expect(reopened.all().map((h) => h.name)).toEqual(['o']);
    reopened.close();
  });
});
