import { describe, it, expect, beforeEach, afterEach } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { discoverPlugins, type Discovery } from '../../src/plugins/discovery.js';
import { INTRINSIC_NAMES } from '../../src/intrinsics/intrinsics.js';
import { startupError } from '../support/startup-error.js';

const APP = '0.1.0';
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'carapace-discovery-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

let toolCounter = 0;
function toolDecl(name = `tool_${toolCounter++}`): Record<string, unknown> {
  return {
    name,
    description: `The ${name} tool`,
    arguments_schema: { type: 'object', additionalProperties: false, properties: { q: { type: 'string' } } },
  };
}

function manifest(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { description: 'A plugin', version: '1.0.0', app_compat: '>=0.1.0', provides: { tools: [toolDecl()] }, ...overrides };
}

function writePlugin(name: string, content: unknown): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(join(dir, name, 'manifest.json'), typeof content === 'string' ? content : JSON.stringify(content));
}

function discover(): Discovery {
  return discoverPlugins(dir, APP, INTRINSIC_NAMES);
}

function reasonFor(d: Discovery, name: string): string {
  const r = d.rejected.find((x) => x.name === name);
  if (!r) throw new Error(`plugin ${name} was not rejected; rejected: ${JSON.stringify(d.rejected)}`);
  return r.reason;
}

describe('discoverPlugins', () => {
  it('discovers a valid plugin and fills in defaults', () => {
    writePlugin('good', manifest({ provides: { tools: [toolDecl('lookup')] } }));
    const d = discover();
    expect(d.rejected).toEqual([]);
    expect(d.plugins).toHaveLength(1);
    const p = d.plugins[0];
    expect(p.name).toBe('good');
    expect(p.dir).toBe(join(dir, 'good'));
    expect(p.manifest.provides.hooks).toEqual([]);
    expect(p.manifest.provides.channels).toEqual([]);
    expect(p.manifest.subscribes).toEqual([]);
    expect(p.tools).toHaveLength(1);
    expect(p.tools[0].name).toBe('lookup');
    expect(p.tools[0].owner).toBe('good');
    expect(p.tools[0].risk_level).toBe('low');
    expect(p.tools[0].validate({ q: 'x' })).toBe(true);
    expect(p.tools[0].validate({ other: 1 })).toBe(false);
  });

  it('returns an empty result for a missing plugins directory', () => {
    expect(discoverPlugins(join(dir, 'does-not-exist'), APP, INTRINSIC_NAMES)).toEqual({ plugins: [], rejected: [] });
  });

  it('ignores hidden folders and folders without a manifest', () => {
    writePlugin('.hidden', manifest());
    mkdirSync(join(dir, 'empty'));
    writeFileSync(join(dir, 'stray-file.json'), '{}');
    writePlugin('visible', manifest());
    const d = discover();
    expect(d.plugins.map((p) => p.name)).toEqual(['visible']);
    expect(d.rejected).toEqual([]);
  });

  it('passes over folders starting with "_" silently (plugins/_template), even a broken one', () => {
    writePlugin('_template', manifest());
    writePlugin('_parked', '{ not json');
    writePlugin('visible', manifest());
    const d = discover();
    expect(d.plugins.map((p) => p.name)).toEqual(['visible']);
    expect(d.rejected).toEqual([]);
  });

  it('rejects a malformed plugin with a reason and keeps the others', () => {
    writePlugin('aaa-good', manifest());
    writePlugin('broken', '{ "description": "oops", ');
    writePlugin('zzz-good', manifest());
    const d = discover();
    expect(d.plugins.map((p) => p.name)).toEqual(['aaa-good', 'zzz-good']);
    expect(d.rejected).toHaveLength(1);
    expect(reasonFor(d, 'broken')).toMatch(/not valid JSON/);
  });

  it('rejects a manifest missing a required field, naming it', () => {
    const m = manifest();
    delete m.version;
    writePlugin('noversion', m);
    writePlugin('ok', manifest());
    const d = discover();
    expect(reasonFor(d, 'noversion')).toContain('version');
    expect(reasonFor(d, 'noversion')).toMatch(/required/);
    expect(d.plugins.map((p) => p.name)).toEqual(['ok']);
  });

  it('rejects a manifest with an extra field, naming it', () => {
    writePlugin('extra', manifest({ homepage: 'https://example.com' }));
    const d = discover();
    expect(reasonFor(d, 'extra')).toContain('homepage');
    expect(d.plugins).toEqual([]);
  });

  it('rejects an arguments_schema without additionalProperties:false', () => {
    const open = { name: 'open_tool', description: 'x', arguments_schema: { type: 'object', properties: {} } };
    writePlugin('openschema', manifest({ provides: { tools: [open] } }));
    const loose = { name: 'loose_tool', description: 'x', arguments_schema: { type: 'object', additionalProperties: true } };
    writePlugin('looseschema', manifest({ provides: { tools: [loose] } }));
    const d = discover();
    expect(reasonFor(d, 'openschema')).toContain('additionalProperties');
    expect(reasonFor(d, 'looseschema')).toContain('additionalProperties');
    expect(d.plugins).toEqual([]);
  });

  it('rejects an app_compat that is not a semver range', () => {
    writePlugin('badrange', manifest({ app_compat: 'not a range!!' }));
    expect(reasonFor(discover(), 'badrange')).toMatch(/app_compat.*not a semver range/);
  });

  it('rejects an app_compat that excludes the running version', () => {
    writePlugin('toonew', manifest({ app_compat: '>=2.0.0' }));
    writePlugin('fits', manifest({ app_compat: '^0.1.0' }));
    const d = discover();
    expect(reasonFor(d, 'toonew')).toMatch(/does not include Carapace 0\.1\.0/);
    expect(d.plugins.map((p) => p.name)).toEqual(['fits']);
  });

  it('rejects a tool schema that does not compile (unknown keyword)', () => {
    const bad = {
      name: 'weird',
      description: 'x',
      arguments_schema: { type: 'object', additionalProperties: false, properties: { a: { type: 'string', frobnicate: 3 } } },
    };
    writePlugin('uncompilable', manifest({ provides: { tools: [bad] } }));
    writePlugin('fine', manifest());
    const d = discover();
    const reason = reasonFor(d, 'uncompilable');
    expect(reason).toContain('weird');
    expect(reason).toMatch(/does not compile/);
    expect(d.plugins.map((p) => p.name)).toEqual(['fine']);
  });

  it('rejects a config_schema that does not compile', () => {
    writePlugin('badconfig', manifest({ config_schema: { type: 'object', bogusKeyword: 1 } }));
    expect(reasonFor(discover(), 'badconfig')).toMatch(/config_schema/);
  });

  it('rejects a folder name that is not a valid plugin name (uppercase)', () => {
    writePlugin('BadName', manifest());
    writePlugin('good', manifest());
    const d = discover();
    expect(reasonFor(d, 'BadName')).toMatch(/folder name/);
    expect(d.plugins.map((p) => p.name)).toEqual(['good']);
  });

  it('rejects a plugin that declares the same tool twice', () => {
    writePlugin('twice', manifest({ provides: { tools: [toolDecl('same'), toolDecl('same')] } }));
    expect(reasonFor(discover(), 'twice')).toMatch(/"same".*twice/);
  });

  it('throws DUPLICATE_TOOL naming both plugins when two plugins declare a tool', () => {
    writePlugin('alpha', manifest({ provides: { tools: [toolDecl('shared_tool')] } }));
    writePlugin('beta', manifest({ provides: { tools: [toolDecl('shared_tool')] } }));
    const err = startupError(discover);
    expect(err.code).toBe('DUPLICATE_TOOL');
    expect(err.message).toContain('shared_tool');
    expect(err.message).toContain('"alpha"');
    expect(err.message).toContain('"beta"');
  });

  it('throws RESERVED_TOOL_NAME for a tool named like an intrinsic', () => {
    expect(INTRINSIC_NAMES).toContain('get_diagnostics');
    writePlugin('sneaky', manifest({ provides: { tools: [toolDecl('get_diagnostics')] } }));
    const err = startupError(discover);
    expect(err.code).toBe('RESERVED_TOOL_NAME');
    expect(err.message).toContain('sneaky');
    expect(err.message).toContain('get_diagnostics');
  });

  it('throws DUPLICATE_HOOK naming both plugins for two memory_brief providers', () => {
    writePlugin('mem-one', manifest({ provides: { tools: [toolDecl()], hooks: ['memory_brief'] } }));
    writePlugin('mem-two', manifest({ provides: { tools: [toolDecl()], hooks: ['memory_brief'] } }));
    const err = startupError(discover);
    expect(err.code).toBe('DUPLICATE_HOOK');
    expect(err.message).toContain('"mem-one"');
    expect(err.message).toContain('"mem-two"');
  });

  it('allows a single memory_brief provider', () => {
    writePlugin('mem', manifest({ provides: { tools: [], hooks: ['memory_brief'] } }));
    const d = discover();
    expect(d.plugins[0].manifest.provides.hooks).toEqual(['memory_brief']);
  });

  it('a rejected plugin does not take part in conflict checks', () => {
    writePlugin('alpha', manifest({ provides: { tools: [toolDecl('shared_tool')] } }));
    writePlugin('beta', manifest({ app_compat: '>=9.0.0', provides: { tools: [toolDecl('shared_tool')] } }));
    writePlugin('gamma', manifest({ homepage: 'x', provides: { tools: [toolDecl('get_diagnostics')] } }));
    const d = discover();
    expect(d.plugins.map((p) => p.name)).toEqual(['alpha']);
    expect(d.rejected.map((r) => r.name).sort()).toEqual(['beta', 'gamma']);
  });

  it('ignores a dangling symlink in the plugins directory instead of failing start-up', () => {
    writePlugin('good', manifest());
    symlinkSync(join(dir, 'nowhere'), join(dir, 'dangling'));
    const d = discover();
    expect(d.plugins.map((p) => p.name)).toEqual(['good']);
  });

  it('is repeatable: discovering the same directory twice gives the same result (schema with $id)', () => {
    const withId = {
      name: 'identified',
      description: 'x',
      arguments_schema: { $id: 'https://carapace.test/discovery/identified.json', type: 'object', additionalProperties: false },
    };
    writePlugin('ided', manifest({ provides: { tools: [withId] } }));
    const first = discover();
    expect(first.rejected).toEqual([]);
    const second = discover();
    expect(second.rejected).toEqual([]);
    expect(second.plugins.map((p) => p.name)).toEqual(['ided']);
  });
});
