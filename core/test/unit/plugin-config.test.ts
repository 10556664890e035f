import { describe, it, expect } from '@jest/globals';
import { resolvePluginConfig } from '../../plugin-host/plugin-config.js';
import { pluginSection } from '../../src/plugins/plugin-settings.js';

const env = { API_TOKEN: 'tok-very-secret-123', HOST: 'mail.example.com', EMPTY: '' } as NodeJS.ProcessEnv;

describe('resolvePluginConfig', () => {
  it('substitutes ${VAR} references in nested objects and arrays, returning the values as secrets', () => {
    const raw = {
      token: '${API_TOKEN}',
      server: { url: 'https://${HOST}/api', port: 993, tls: true },
      list: ['a', '${HOST}', { deep: 'x${API_TOKEN}y' }],
      none: null,
    };
    const r = resolvePluginConfig(raw, undefined, env);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config).toEqual({
      token: 'tok-very-secret-123',
      server: { url: 'https://mail.example.com/api', port: 993, tls: true },
      list: ['a', 'mail.example.com', { deep: 'xtok-very-secret-123y' }],
      none: null,
    });
    expect(new Set(r.secrets)).toEqual(new Set(['tok-very-secret-123', 'mail.example.com']));
  });

  it('does not mutate the raw configuration', () => {
    const raw = { token: '${API_TOKEN}', nested: { a: ['${HOST}'] } };
    resolvePluginConfig(raw, undefined, env);
    expect(raw).toEqual({ token: '${API_TOKEN}', nested: { a: ['${HOST}'] } });
  });

  it('leaves strings without references alone and returns no secrets', () => {
    const r = resolvePluginConfig({ a: 'plain $HOST {HOST} ${lower}', n: 1 }, undefined, env);
    expect(r).toEqual({ ok: true, config: { a: 'plain $HOST {HOST} ${lower}', n: 1 }, secrets: [] });
  });

  it('fails naming a missing variable but never any value', () => {
    const r = resolvePluginConfig({ token: '${API_TOKEN}', other: '${NOT_SET}', again: ['${NOT_SET}'], e: '${EMPTY}' }, undefined, env);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toContain('NOT_SET');
    expect(r.reason).toContain('EMPTY');
    expect(r.reason).not.toContain('tok-very-secret-123');
    expect(r.reason.match(/NOT_SET/g)).toHaveLength(1);
  });

  it('validates against the config schema and applies defaults', () => {
    const schema = {
      type: 'object',
      additionalProperties: false,
      required: ['token'],
      properties: { token: { type: 'string' }, poll_seconds: { type: 'integer', default: 60 } },
    };
    const r = resolvePluginConfig({ token: '${API_TOKEN}' }, schema, env);
    expect(r).toEqual({ ok: true, config: { token: 'tok-very-secret-123', poll_seconds: 60 }, secrets: ['tok-very-secret-123'] });
  });

  it('fails with a reason when the schema rejects the configuration', () => {
    const schema = { type: 'object', additionalProperties: false, required: ['token'], properties: { token: { type: 'string' } } };
    const missing = resolvePluginConfig({ other: 1 }, schema, env);
    expect(missing.ok).toBe(false);
    if (!missing.ok) {
      expect(missing.reason).toMatch(/^config: /);
      expect(missing.reason).toContain('token');
      expect(missing.notConfigured).toBe(false);
    }
    // No settings at all is not a fault: the plugin is simply off until set up.
    const unset = resolvePluginConfig({}, schema, env);
    expect(unset).toEqual({ ok: false, reason: expect.stringContaining('no settings for it'), notConfigured: true });
    const extra = resolvePluginConfig({ token: 'x', tokn: 'y' }, schema, env);
    expect(extra.ok).toBe(false);
    if (!extra.ok) expect(extra.reason).toContain('tokn');
  });

  it('a schema failure reason does not echo a substituted secret value', () => {
    const schema = { type: 'object', additionalProperties: false, properties: { port: { type: 'integer' } } };
    const r = resolvePluginConfig({ port: '${API_TOKEN}' }, schema, env);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).not.toContain('tok-very-secret-123');
  });

  it('inserts values literally, even with $-replacement patterns in them', () => {
    const r = resolvePluginConfig({ a: 'x${WEIRD}y' }, undefined, { WEIRD: "$&$1$$$'" } as NodeJS.ProcessEnv);
    expect(r).toEqual({ ok: true, config: { a: "x$&$1$$$'y" }, secrets: ["$&$1$$$'"] });
  });
});

describe('pluginSection', () => {
  it("returns the plugin's own section", () => {
    expect(pluginSection({ memory: { max: 3 } }, 'memory')).toEqual({ max: 3 });
  });

  it('returns an empty section for a plugin named like an Object.prototype member', () => {
    const plugins = JSON.parse('{"memory":{}}') as Record<string, Record<string, unknown>>;
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(pluginSection(plugins, name)).toEqual({});
    }
  });
});
