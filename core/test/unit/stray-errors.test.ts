// Who a stray error belongs to when no async context says: the first plugin folder in its
// stack, never a folder that merely shares a prefix; and a plugin failing in a loop is
// reported a bounded number of times.
import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { pluginInStack, StrayErrors } from '../../plugin-host/stray-errors.js';

const dirs = new Map([
  ['tasks', '/app/dist/plugins/tasks'],
  ['tasks-extra', '/app/dist/plugins/tasks-extra'],
  ['memory', '/app/dist/plugins/memory'],
]);

function errorWithStack(...frames: string[]): Error {
  const err = new Error('boom');
  err.stack = ['Error: boom', ...frames.map((f) => `    at f (file://${f}:1:1)`)].join('\n');
  return err;
}

describe('pluginInStack', () => {
  it('names the plugin whose folder comes first in the stack', () => {
    expect(pluginInStack(errorWithStack('/app/dist/plugins/tasks-extra/store.js', '/app/dist/plugins/memory/handler.js'), dirs)).toBe('tasks-extra');
    expect(pluginInStack(errorWithStack('/app/node_modules/x/index.js', '/app/dist/plugins/memory/handler.js'), dirs)).toBe('memory');
  });

  it('names nobody for the host\'s own code or a value without a stack', () => {
    expect(pluginInStack(errorWithStack('/app/dist/core/plugin-host/host.js'), dirs)).toBeNull();
    expect(pluginInStack('a string', dirs)).toBeNull();
  });
});

describe('StrayErrors', () => {
  it('reports a plugin\'s fault at most 10 times a minute; an error of nobody\'s is fatal', () => {
    const reports: string[] = [];
    const fatal: unknown[] = [];
    const stray = new StrayErrors({
      attribute: (e) => (e === 'host' ? null : 'memory'),
      report: (plugin) => reports.push(plugin),
      fatal: (_kind, e) => fatal.push(e),
      log: pino({ level: 'silent' }),
    });
    for (let i = 0; i < 25; i++) stray.handle('unhandledRejection', new Error(`loop ${i}`));
    stray.handle('uncaughtException', 'host');
    expect(reports).toHaveLength(10);
    expect(fatal).toEqual(['host']);
  });
});
