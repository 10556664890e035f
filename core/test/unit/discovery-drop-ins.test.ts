// A person's own plugins (a later folder) never shadow or break the bundled ones: a taken
// name, tool name or hook rejects the drop-in alone, with the reason; a clean one loads.
import { describe, expect, it } from '@jest/globals';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { discoverPlugins } from '../../src/plugins/discovery.js';
import { FIXTURES } from '../harness.js';

function manifest(tools: string[]): string {
  return JSON.stringify({
    description: 'drop-in',
    version: '1.0.0',
    app_compat: '>=0.1.0',
    provides: { tools: tools.map((name) => ({ name, description: name, arguments_schema: { type: 'object', additionalProperties: false, properties: {} } })) },
  });
}

describe('drop-in plugins', () => {
  it('load beside the bundled ones; a taken name or tool rejects only the drop-in; _ folders are skipped', () => {
    const root = mkdtempSync(join(tmpdir(), 'cp-dropins-'));
    const bundled = join(root, 'bundled');
    const mine = join(root, 'mine');
    cpSync(join(FIXTURES, 'echo'), join(bundled, 'echo'), { recursive: true });
    for (const [name, tools] of [['weather', ['forecast']], ['echo', ['other_tool']], ['copycat', ['echo']], ['_template', ['template_tool']]] as const) {
      mkdirSync(join(mine, name), { recursive: true });
      writeFileSync(join(mine, name, 'manifest.json'), manifest([...tools]));
    }
    const found = discoverPlugins(`${bundled}:${mine}`, '0.1.0', ['list_tools']);
    expect(found.plugins.map((p) => `${p.name}@${p.dir}`)).toEqual([`echo@${join(bundled, 'echo')}`, `weather@${join(mine, 'weather')}`]);
    expect(found.rejected).toEqual([
      { name: join(mine, 'copycat'), reason: expect.stringContaining('Tool "echo" is declared by both plugin "echo" and plugin "copycat"') },
      { name: join(mine, 'echo'), reason: 'a plugin named "echo" is already installed' },
    ]);
  });
});
