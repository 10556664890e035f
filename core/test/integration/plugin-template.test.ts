// plugins/_template as a person would use it: copied to a folder outside the project
// (where `#sdk` does not resolve, as for a drop-in), loaded by the real plugin host in a
// process of its own. Its tool answers, keeps its count in its own data folder, and its
// structured error (thrown with services.errors, no SDK import) reaches the agent as one.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, Stack } from '../harness.js';
import type { Session } from '../../src/boundary/session-table.js';

let stack: Stack;
let session: Session;
let outside: string;

beforeAll(async () => {
  outside = mkdtempSync(join(tmpdir(), 'cp-dropin-'));
  // Readable by the plugin's own uid (the tests run as root, so plugins run as others).
  chmodSync(outside, 0o755);
  cpSync(join(ROOT, 'plugins/_template'), join(outside, 'greeter'), { recursive: true });
  stack = await Stack.start({ plugins: [], extraPluginDirs: { greeter: join(outside, 'greeter') }, config: { groups: { family: {} }, plugins: { greeter: { greeting: 'Ahoy' } } } });
  session = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
  rmSync(outside, { recursive: true, force: true });
});

describe('the plugin template, as a drop-in outside the project', () => {
  it('starts, and #sdk would not resolve where it lives', async () => {
    expect(stack.core.catalog.state('greeter')).toBe('healthy');
    // What a handler there importing the SDK would meet.
    const probe = join(outside, 'probe.mjs');
    writeFileSync(probe, "import '#sdk';\n");
    const run = spawnSync(process.execPath, [probe], { encoding: 'utf8' });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/ERR_PACKAGE_IMPORT_NOT_DEFINED/);
  });

  it('answers its tool with its configuration and keeps its count in its own data folder', async () => {
    const first = await stack.ipc(session, 'tool.invoke.template_hello', { name: 'Ada' });
    expect(first.out).toEqual({ text: 'Ahoy, Ada!', greeted: 1 });
    const second = await stack.ipc(session, 'tool.invoke.template_hello', { name: 'Grace' });
    expect(second.out).toEqual({ text: 'Ahoy, Grace!', greeted: 2 });
    const state = JSON.parse(readFileSync(join(stack.dir, 'data', 'plugins', 'greeter', 'state.json'), 'utf8')) as unknown;
    expect(state).toEqual({ greeted: 2 });
  });

  it('refuses a blank name with its own structured error (services.errors.ToolError), not a crash', async () => {
    const r = await stack.ipc(session, 'tool.invoke.template_hello', { name: '   ' });
    expect(r.code).toBe(1);
    expect(r.err).toMatchObject({ code: 'EMPTY_NAME', retriable: false });
    expect(r.err.message).toMatch(/blank/);
  });
});
