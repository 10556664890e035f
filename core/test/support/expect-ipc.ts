// What an ipc call printed, checked the same way by every integration test. A module of
// its own, not the harness: the benchmarks import the harness outside Jest, where
// @jest/globals refuses to load.
import { expect } from '@jest/globals';
import type { IpcResult } from '../harness.js';

/** The call succeeded and printed nothing on stderr; its result. */
export function expectOk(r: IpcResult): any {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r.out;
}

/** The call failed with `code` (and the fields in `extra`); its error object. */
export function expectError(r: IpcResult, code: string, extra: Record<string, unknown> = {}): any {
  expect(r.code).toBe(1);
  expect(r.err).toMatchObject({ code, ...extra });
  return r.err;
}
