import { describe, it, expect } from '@jest/globals';
import { GroupAuthorizer } from '../../src/pipeline/authorize.js';
import { parseConfig } from '../../src/config.js';
import type { ToolEntry } from '../../src/plugins/discovery.js';

function tool(name: string, owner: string): ToolEntry {
  const validate = (() => true) as unknown as ToolEntry['validate'];
  return { name, description: name, risk_level: 'low', arguments_schema: { type: 'object', additionalProperties: false }, owner, validate };
}

const echo = tool('echo', 'echo-plugin');
const mail = tool('send_mail', 'mail-plugin');
const intrinsic = tool('get_diagnostics', 'core');

describe('GroupAuthorizer.mayUse', () => {
  it('allows every tool with the defaults ("*")', () => {
    const auth = new GroupAuthorizer(parseConfig({}));
    expect(auth.mayUse('main', echo)).toBe(true);
    expect(auth.mayUse('main', mail)).toBe(true);
    expect(auth.mayUse('main', intrinsic)).toBe(true);
  });

  it('always allows intrinsics (owner "core"), even for a group with no tools and no plugins', () => {
    const auth = new GroupAuthorizer(parseConfig({ groups: { locked: { tools: [], plugins: [] } }, default_group: { tools: [], plugins: [] } }));
    expect(auth.mayUse('locked', intrinsic)).toBe(true);
    expect(auth.mayUse('unlisted', intrinsic)).toBe(true);
    expect(auth.mayUse('locked', echo)).toBe(false);
  });

  it('lets a core tool that acts (run_program) follow the group\'s tool list, never its plugin list', () => {
    const runs = { ...tool('run_program', 'core'), acts: true };
    const auth = new GroupAuthorizer(parseConfig({ groups: { kids: { tools: ['echo'] }, main: { tools: ['*'], plugins: [] }, named: { tools: ['run_program'], plugins: [] } } }));
    expect(auth.mayUse('kids', runs)).toBe(false);
    expect(auth.mayUse('kids', intrinsic)).toBe(true);
    expect(auth.mayUse('main', runs)).toBe(true);
    expect(auth.mayUse('named', runs)).toBe(true);
  });

  it('follows a group allow-list of tool names', () => {
    const auth = new GroupAuthorizer(parseConfig({ groups: { kids: { tools: ['echo'] } } }));
    expect(auth.mayUse('kids', echo)).toBe(true);
    expect(auth.mayUse('kids', mail)).toBe(false);
  });

  it('denies a listed tool whose plugin the group may not see', () => {
    const auth = new GroupAuthorizer(parseConfig({ groups: { kids: { tools: ['*'], plugins: ['echo-plugin'] } } }));
    expect(auth.mayUse('kids', echo)).toBe(true);
    expect(auth.mayUse('kids', mail)).toBe(false);
    const explicit = new GroupAuthorizer(parseConfig({ groups: { kids: { tools: ['send_mail'], plugins: ['echo-plugin'] } } }));
    expect(explicit.mayUse('kids', mail)).toBe(false);
  });

  it('uses default_group for a group not listed in groups', () => {
    const auth = new GroupAuthorizer(
      parseConfig({ groups: { main: { tools: ['*'] } }, default_group: { tools: ['echo'], plugins: ['echo-plugin'] } }),
    );
    expect(auth.mayUse('main', mail)).toBe(true);
    expect(auth.mayUse('stranger', echo)).toBe(true);
    expect(auth.mayUse('stranger', mail)).toBe(false);
  });

  it('uses default_group for an unlisted group named like an Object.prototype member', () => {
    // These match GROUP_NAME_PATTERN (^[a-zA-Z0-9_-]{1,64}$), so sessions and plugin events can carry them.
    const auth = new GroupAuthorizer(parseConfig({ default_group: { tools: ['echo'], plugins: ['*'] } }));
    for (const group of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__']) {
      expect(auth.mayUse(group, echo)).toBe(true);
      expect(auth.mayUse(group, mail)).toBe(false);
      expect(auth.pluginMaySee('echo-plugin', group)).toBe(true);
    }
  });
});

describe('GroupAuthorizer.pluginMaySee', () => {
  it('honours "*" and explicit plugin lists', () => {
    const auth = new GroupAuthorizer(parseConfig({ groups: { kids: { plugins: ['echo-plugin'] } } }));
    expect(auth.pluginMaySee('anything', 'main')).toBe(true);
    expect(auth.pluginMaySee('echo-plugin', 'kids')).toBe(true);
    expect(auth.pluginMaySee('mail-plugin', 'kids')).toBe(false);
  });
});
