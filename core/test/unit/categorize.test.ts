import { describe, it, expect } from '@jest/globals';
import { categorize, TimeoutError } from '../../plugin-host/load-handler.js';
import { isJsonData } from '../../plugin-host/runner/plugin-runner.js';
import { InitError } from '../../sdk/index.js';

describe('categorize', () => {
  it('keeps the category of an InitError', () => {
    expect(categorize(new InitError('CONFIG_ERROR', 'bad'))).toBe('CONFIG_ERROR');
    expect(categorize(new InitError('AUTH_ERROR', 'no'))).toBe('AUTH_ERROR');
    expect(categorize(new InitError('NETWORK_ERROR', 'down'))).toBe('NETWORK_ERROR');
  });

  it('maps ECONNREFUSED and other network codes to NETWORK_ERROR', () => {
    const direct = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:993'), { code: 'ECONNREFUSED' });
    expect(categorize(direct)).toBe('NETWORK_ERROR');
    expect(categorize(Object.assign(new Error('x'), { code: 'ENOTFOUND' }))).toBe('NETWORK_ERROR');
    expect(categorize(Object.assign(new Error('x'), { code: 'ETIMEDOUT' }))).toBe('NETWORK_ERROR');
  });

  it('maps a fetch-style error with cause.code to NETWORK_ERROR', () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(categorize(new TypeError('fetch failed', { cause }))).toBe('NETWORK_ERROR');
    expect(categorize(new TypeError('fetch failed', { cause: { code: 'UND_ERR_CONNECT_TIMEOUT' } }))).toBe('NETWORK_ERROR');
  });

  it('maps status 401/403 (status or statusCode) to AUTH_ERROR', () => {
    expect(categorize(Object.assign(new Error('unauthorized'), { status: 401 }))).toBe('AUTH_ERROR');
    expect(categorize(Object.assign(new Error('forbidden'), { status: 403 }))).toBe('AUTH_ERROR');
    expect(categorize(Object.assign(new Error('forbidden'), { statusCode: 403 }))).toBe('AUTH_ERROR');
  });

  it('maps everything else to INTERNAL_ERROR', () => {
    expect(categorize(new Error('boom'))).toBe('INTERNAL_ERROR');
    expect(categorize(Object.assign(new Error('x'), { status: 500 }))).toBe('INTERNAL_ERROR');
    expect(categorize(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe('INTERNAL_ERROR');
    expect(categorize(Object.assign(new Error('x'), { status: '401' }))).toBe('INTERNAL_ERROR');
    expect(categorize('a string')).toBe('INTERNAL_ERROR');
    expect(categorize(null)).toBe('INTERNAL_ERROR');
    expect(categorize(undefined)).toBe('INTERNAL_ERROR');
    // A look-alike with a category field is not an InitError.
    expect(categorize({ category: 'AUTH_ERROR' })).toBe('INTERNAL_ERROR');
  });
});

describe('isJsonData', () => {
  it('accepts plain JSON values', () => {
    expect(isJsonData(null)).toBe(true);
    expect(isJsonData('s')).toBe(true);
    expect(isJsonData(true)).toBe(true);
    expect(isJsonData(0)).toBe(true);
    expect(isJsonData(-1.5)).toBe(true);
    expect(isJsonData({})).toBe(true);
    expect(isJsonData([])).toBe(true);
    expect(isJsonData({ a: [1, 'two', { three: null, four: false }], b: { c: { d: [] } } })).toBe(true);
    expect(isJsonData(Object.create(null))).toBe(true);
    expect(isJsonData(JSON.parse('{"__proto__": {"a": 1}}'))).toBe(true);
  });

  it('accepts an undefined property value (JSON.stringify omits it)', () => {
    expect(isJsonData({ a: undefined, b: 1 })).toBe(true);
  });

  it('rejects non-finite numbers', () => {
    expect(isJsonData(NaN)).toBe(false);
    expect(isJsonData(Infinity)).toBe(false);
    expect(isJsonData(-Infinity)).toBe(false);
    expect(isJsonData({ a: [1, NaN] })).toBe(false);
  });

  it('rejects BigInt, functions, symbols and undefined at the top level', () => {
    expect(isJsonData(10n)).toBe(false);
    expect(isJsonData({ n: 10n })).toBe(false);
    expect(isJsonData(() => 1)).toBe(false);
    expect(isJsonData({ f: () => 1 })).toBe(false);
    expect(isJsonData(Symbol('s'))).toBe(false);
    expect(isJsonData([Symbol('s')])).toBe(false);
    expect(isJsonData(undefined)).toBe(false);
  });

  it('rejects class instances, including Map, Set, Date, RegExp, Buffer and boxed primitives', () => {
    class Point {
      constructor(
        public x = 1,
        public y = 2,
      ) {}
    }
    expect(isJsonData(new Point())).toBe(false);
    expect(isJsonData(new Map([['a', 1]]))).toBe(false);
    expect(isJsonData(new Set([1]))).toBe(false);
    expect(isJsonData(new Date(0))).toBe(false);
    expect(isJsonData(/re/)).toBe(false);
    expect(isJsonData(Buffer.from('x'))).toBe(false);
    expect(isJsonData(new Uint8Array(2))).toBe(false);
    expect(isJsonData(new Number(1))).toBe(false);
    expect(isJsonData(new String('s'))).toBe(false);
    expect(isJsonData(new Error('e'))).toBe(false);
    expect(isJsonData({ nested: [{ when: new Date(0) }] })).toBe(false);
  });

  it('rejects cycles', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(isJsonData(a)).toBe(false);
    const arr: unknown[] = [1];
    arr.push({ back: arr });
    expect(isJsonData(arr)).toBe(false);
  });

  it('accepts shared references that do not form a cycle', () => {
    const shared = { v: 1 };
    expect(isJsonData({ a: shared, b: shared, c: [shared, shared] })).toBe(true);
    const sharedArr = [1, 2];
    expect(isJsonData([sharedArr, { x: sharedArr }])).toBe(true);
  });
});

describe('categorize: lifecycle timeouts', () => {
  it('an initialize() that times out is a NETWORK_ERROR', () => {
    expect(categorize(new TimeoutError('initialize() did not finish within 30000 ms'))).toBe('NETWORK_ERROR');
  });
});
