// A plugin's data folder as the (root) plugin host prepares it: its own, and reachable by
// its user; a folder above that others may not pass is named, not left to fail in each plugin.
import { describe, expect, it } from '@jest/globals';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginIds, prepareDataDir } from '../../plugin-host/isolation.js';

const asRoot = PluginIds.isolating() ? it : it.skip;
const ids = { uid: 20_999, gid: 20_999 };

describe('prepareDataDir', () => {
  asRoot('gives the plugin its folder (0700, its own) under a root others may pass but not list', () => {
    const top = mkdtempSync(join(tmpdir(), 'cp-pdata-'));
    try {
      chmodSync(top, 0o711);
      const root = join(top, 'data', 'plugins');
      prepareDataDir(root, join(root, 'notes'), ids);
      expect(statSync(root).mode & 0o777).toBe(0o711);
      const own = statSync(join(root, 'notes'));
      expect([own.mode & 0o777, own.uid, own.gid]).toEqual([0o700, ids.uid, ids.gid]);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
  });

  asRoot('names the folder above that locks every plugin out', () => {
    const top = mkdtempSync(join(tmpdir(), 'cp-pdata-'));
    try {
      chmodSync(top, 0o711);
      mkdirSync(join(top, 'data'), { mode: 0o700 });
      const root = join(top, 'data', 'plugins');
      expect(() => prepareDataDir(root, join(root, 'notes'), ids)).toThrow(`${join(top, 'data')} is closed to the plugins' users (mode 700): allow others to pass (chmod o+x)`);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
  });
});
