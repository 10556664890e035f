import { describe, it, expect } from '@jest/globals';
import { compileTool, type ToolEntry } from '../../src/plugins/discovery.js';
import { describeFailure } from '../../src/plugins/schema-compiler.js';
import { validatePayload } from '../../src/pipeline/validate-payload.js';
import type { JsonObject } from '../../src/protocol/envelope.js';

const echoSchema: JsonObject = {
  type: 'object',
  additionalProperties: false,
  required: ['text'],
  properties: {
    text: { type: 'string', maxLength: 100 },
    count: { type: 'integer', minimum: 0, maximum: 10, default: 1 },
    nested: {
      type: 'object',
      additionalProperties: false,
      properties: { flag: { type: 'boolean' }, deep: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string' } } } },
    },
  },
};

let counter = 0;
function tool(schema: JsonObject = echoSchema): ToolEntry {
  // Fresh copy per tool: ajv caches compiled schemas by object identity.
  return compileTool({ name: `echo_${counter++}`, description: 'Echo', risk_level: 'low', arguments_schema: structuredClone(schema) }, 'echo');
}

function args(json: string): JsonObject {
  return JSON.parse(json) as JsonObject;
}

describe('compileTool', () => {
  it('keeps the declaration and records the owner', () => {
    const t = compileTool({ name: 'echo', description: 'Echo', risk_level: 'high', arguments_schema: structuredClone(echoSchema) }, 'plug');
    expect(t.name).toBe('echo');
    expect(t.description).toBe('Echo');
    expect(t.risk_level).toBe('high');
    expect(t.owner).toBe('plug');
    expect(typeof t.validate).toBe('function');
  });

  it('throws on a schema with an unknown keyword (strict mode)', () => {
    expect(() =>
      compileTool({ name: 'x', description: 'x', risk_level: 'low', arguments_schema: { type: 'object', additionalProperties: false, frobnicate: true } }, 'p'),
    ).toThrow();
  });
});

describe('validatePayload', () => {
  it('accepts valid arguments and returns null', () => {
    expect(validatePayload(tool(), args('{"text":"hi","count":3,"nested":{"flag":true}}'))).toBeNull();
  });

  it('applies defaults in place', () => {
    const a = args('{"text":"hi"}');
    expect(validatePayload(tool(), a)).toBeNull();
    expect(a).toEqual({ text: 'hi', count: 1 });
  });

  it('does not overwrite a provided value with the default', () => {
    const a = args('{"text":"hi","count":0}');
    expect(validatePayload(tool(), a)).toBeNull();
    expect(a.count).toBe(0);
  });

  it('rejects an undeclared property, naming it, at stage 3', () => {
    const err = validatePayload(tool(), args('{"text":"hi","x":1}'));
    expect(err).toEqual({ code: 'VALIDATION_FAILED', message: 'additionalProperties "x" not allowed', retriable: false, stage: 3, field: 'x' });
  });

  it('rejects forged envelope fields such as group', () => {
    const err = validatePayload(tool(), args('{"text":"hi","group":"admin"}'));
    expect(err?.code).toBe('VALIDATION_FAILED');
    expect(err?.field).toBe('group');
    expect(err?.message).toBe('additionalProperties "group" not allowed');
  });

  it('gives the dotted path for a nested undeclared property', () => {
    const err = validatePayload(tool(), args('{"text":"hi","nested":{"x":true}}'));
    expect(err?.field).toBe('nested.x');
    expect(err?.message).toBe('additionalProperties "x" not allowed');
    expect(err?.stage).toBe(3);
  });

  it('gives the dotted path for a deeper missing required property', () => {
    const err = validatePayload(tool(), args('{"text":"hi","nested":{"deep":{}}}'));
    expect(err?.field).toBe('nested.deep.id');
    expect(err?.message).toBe('missing required property "id"');
  });

  it('rejects a missing required property', () => {
    const err = validatePayload(tool(), args('{"count":2}'));
    expect(err).toEqual({ code: 'VALIDATION_FAILED', message: 'missing required property "text"', retriable: false, stage: 3, field: 'text' });
  });

  it('rejects a wrong type with the field path', () => {
    const err = validatePayload(tool(), args('{"text":5}'));
    expect(err?.code).toBe('VALIDATION_FAILED');
    expect(err?.stage).toBe(3);
    expect(err?.field).toBe('text');
    expect(err?.message).toMatch(/^text /);
    expect(err?.message).toMatch(/string/);
  });

  it('rejects a nested wrong type with the dotted path', () => {
    const err = validatePayload(tool(), args('{"text":"a","nested":{"flag":"yes"}}'));
    expect(err?.field).toBe('nested.flag');
    expect(err?.message).toMatch(/^nested\.flag /);
  });

  it('rejects out-of-range values', () => {
    const err = validatePayload(tool(), args('{"text":"a","count":11}'));
    expect(err?.field).toBe('count');
    expect(err?.code).toBe('VALIDATION_FAILED');
  });

  it('rejects an own "__proto__" key', () => {
    const a = args('{"text":"hi","__proto__":{"polluted":true}}');
    expect(Object.prototype.hasOwnProperty.call(a, '__proto__')).toBe(true);
    const err = validatePayload(tool(), a);
    expect(err?.code).toBe('VALIDATION_FAILED');
    expect(err?.stage).toBe(3);
    expect(err?.field).toBe('__proto__');
    expect(err?.message).toBe('additionalProperties "__proto__" not allowed');
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('rejects an own "constructor" key', () => {
    const err = validatePayload(tool(), args('{"text":"hi","constructor":{"prototype":{}}}'));
    expect(err?.field).toBe('constructor');
    expect(err?.message).toBe('additionalProperties "constructor" not allowed');
  });

  it('rejects "__proto__" and "constructor" even in a schema with many properties', () => {
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 20; i++) properties[`p${i}`] = { type: 'string' };
    const wide = tool({ type: 'object', additionalProperties: false, properties });
    expect(validatePayload(wide, args('{"p0":"a"}'))).toBeNull();
    expect(validatePayload(wide, args('{"p0":"a","__proto__":{}}'))?.field).toBe('__proto__');
    expect(validatePayload(wide, args('{"p0":"a","constructor":1}'))?.field).toBe('constructor');
    expect(validatePayload(wide, args('{"toString":"x"}'))?.field).toBe('toString');
  });

  it('rejects a nested "__proto__" key with the dotted path', () => {
    const err = validatePayload(tool(), args('{"text":"hi","nested":{"__proto__":{"flag":true}}}'));
    expect(err?.field).toBe('nested.__proto__');
  });
});

describe('describeFailure', () => {
  it('returns a generic failure when there are no errors', () => {
    expect(describeFailure(null)).toEqual({ field: '', message: 'Invalid value' });
    expect(describeFailure(undefined)).toEqual({ field: '', message: 'Invalid value' });
    expect(describeFailure([])).toEqual({ field: '', message: 'Invalid value' });
  });

  it('decodes JSON-pointer escapes (~1 and ~0) in the path', () => {
    const f = describeFailure([
      { keyword: 'type', instancePath: '/a~1b/c~0d', schemaPath: '#', params: { type: 'string' }, message: 'must be string' },
    ]);
    expect(f).toEqual({ field: 'a/b.c~d', message: 'a/b.c~d must be string' });
  });

  it('says "value" for a root-level failure', () => {
    const f = describeFailure([{ keyword: 'type', instancePath: '', schemaPath: '#', params: { type: 'object' }, message: 'must be object' }]);
    expect(f).toEqual({ field: '', message: 'value must be object' });
  });
});
