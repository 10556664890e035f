// A group's workspace label (agents/workspace-labels.ts): set when a session of the group
// reads external content, kept across restarts, cleared when a check finds nothing changed
// since or the person has checked the files; a broken file is moved aside and said.
import { afterEach, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { changedFilesCommand, MAX_LISTED_FILES, WorkspaceLabels } from '../../src/agents/workspace-labels.js';

const dirs: string[] = [];
const fresh = () => {
  const dir = mkdtempSync(join(tmpdir(), 'workspace-labels-'));
  dirs.push(dir);
  return join(dir, 'workspace-labels.json');
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('WorkspaceLabels', () => {
  it('remembers the first time a group read external content, across a restart', () => {
    const file = fresh();
    const labels = new WorkspaceLabels(file);
    expect(labels.since('family')).toBeNull();
    labels.labelled('family', new Date('2026-11-27T10:00:00Z'));
    labels.labelled('family', new Date('2026-11-27T11:00:00Z'));
    expect(new WorkspaceLabels(file).since('family')).toBe('2026-11-27T10:00:00.000Z');
  });

  it('a check: changed files keep the label and are listed (bounded); none at all clears it; a check that could not look keeps it', () => {
    const labels = new WorkspaceLabels(fresh());
    expect(labels.checked('family', { files: ['a'], complete: true })).toBe(false); // never labelled
    labels.labelled('family');
    expect(labels.checked('family', null)).toBe(true);
    expect(labels.get('family')).toMatchObject({ files: [], more: true });
    const many = Array.from({ length: MAX_LISTED_FILES + 5 }, (_, i) => `f${i}`);
    expect(labels.checked('family', { files: many, complete: true })).toBe(true);
    expect(labels.get('family')).toMatchObject({ files: many.slice(0, MAX_LISTED_FILES), more: 5 });
    expect(labels.checked('family', { files: ['x'], complete: false })).toBe(true);
    expect(labels.get('family')?.more).toBe(true);
    expect(labels.checked('family', { files: [], complete: true })).toBe(false);
    expect(labels.get('family')).toBeNull();
  });

  it('the person\'s review clears it; a broken file is moved aside and said', () => {
    const file = fresh();
    const labels = new WorkspaceLabels(file);
    labels.labelled('family');
    expect(labels.reviewed('family')).toBe(true);
    expect(labels.reviewed('family')).toBe(false);
    expect(new WorkspaceLabels(file).since('family')).toBeNull();
    writeFileSync(file, '{"version": 1, "groups": "not a map"}');
    const problems: string[] = [];
    expect(new WorkspaceLabels(file, (p) => problems.push(p.movedAside)).since('family')).toBeNull();
    expect(problems).toHaveLength(1);
    expect(readdirSync(join(file, '..')).some((f) => f.startsWith('workspace-labels.json.corrupt-'))).toBe(true);
  });

  it('looks by ctime (which no process without root sets back), one second early, past lost+found', () => {
    const cmd = changedFilesCommand('2026-11-27T10:00:00.500Z');
    expect(cmd).toContain('-newerct');
    expect(cmd[cmd.indexOf('-newerct') + 1]).toBe(`@${Date.UTC(2026, 10, 27, 10) / 1000 - 1}`);
    expect(cmd.slice(0, 7)).toEqual(['find', '/workspace/group', '-xdev', '-path', '/workspace/group/lost+found', '-prune', '-o']);
  });
});
