// For unit tests of start-up checks. Imports no harness, so they never load the Core.
import { expect } from '@jest/globals';
import { StartupError } from '../../src/protocol/errors.js';

/** The StartupError that `fn` throws (failing the test if it throws anything else, or nothing). */
export function startupError(fn: () => unknown): StartupError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(StartupError);
    return err as StartupError;
  }
  throw new Error('expected a StartupError');
}
