// A plugin failing in a loop is reported a bounded number of times; after an uncaught
// exception its process is ended (and started again by the host), after a rejection not.
import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { StrayErrors } from '../../plugin-host/stray-errors.js';

describe('StrayErrors', () => {
  it("reports a plugin's fault at most 10 times a minute; only an exception ends its process", () => {
    const reports: string[] = [];
    let ended = 0;
    const stray = new StrayErrors({ plugin: 'memory', report: (m) => reports.push(m), afterException: () => ended++, log: pino({ level: 'silent' }) });
    for (let i = 0; i < 25; i++) stray.handle('unhandledRejection', new Error(`loop ${i}`));
    expect(reports).toHaveLength(10);
    expect(reports[0]).toContain('an unhandled promise rejection in plugin "memory": Error: loop 0');
    expect(ended).toBe(0);
    stray.handle('uncaughtException', new Error('boom'));
    expect(reports).toHaveLength(10);
    expect(ended).toBe(1);
  });
});
