import { describe, it, expect } from '@jest/globals';
import { MAX_MESSAGE_BYTES, parseWire, type WireParse } from '../../src/boundary/wire.js';

function frame(value: unknown): Buffer {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8');
}

function failure(r: WireParse): Extract<WireParse, { ok: false }> {
  if (r.ok) throw new Error(`expected a rejection, got ${JSON.stringify(r.message)}`);
  return r;
}

function expectStage1(r: WireParse, field: string): Extract<WireParse, { ok: false }> {
  const f = failure(r);
  expect(f.error.code).toBe('VALIDATION_FAILED');
  expect(f.error.stage).toBe(1);
  expect(f.error.retriable).toBe(false);
  expect(f.error.field).toBe(field);
  expect(typeof f.error.message).toBe('string');
  expect(f.error.message.length).toBeGreaterThan(0);
  return f;
}

describe('parseWire', () => {
  it('parses a valid message', () => {
    const r = parseWire(frame({ topic: 'tool.invoke.echo', correlation: 'abc-123', arguments: { text: 'hi', n: 2 } }));
    expect(r).toEqual({ ok: true, message: { topic: 'tool.invoke.echo', correlation: 'abc-123', arguments: { text: 'hi', n: 2 } } });
  });

  it('accepts every allowed correlation character and 128-char correlations', () => {
    const c = 'Az09._:-';
    expect(parseWire(frame({ topic: 't', correlation: c })).ok).toBe(true);
    expect(parseWire(frame({ topic: 't', correlation: 'x'.repeat(128) })).ok).toBe(true);
  });

  it('treats missing arguments as {}', () => {
    const r = parseWire(frame({ topic: 'tool.invoke.echo', correlation: 'c1' }));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.message.arguments).toEqual({});
  });

  it('ignores extra wire fields such as group and source', () => {
    const r = parseWire(
      frame({ topic: 't', correlation: 'c1', arguments: {}, group: 'admin', source: 'core', type: 'response', id: 'x' }),
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(Object.keys(r.message).sort()).toEqual(['arguments', 'correlation', 'topic']);
    expect(r.message).not.toHaveProperty('group');
    expect(r.message).not.toHaveProperty('source');
  });

  it('rejects a frame over 1 MiB at stage 1', () => {
    const big = JSON.stringify({ topic: 't', correlation: 'c1', arguments: { s: 'x'.repeat(MAX_MESSAGE_BYTES) } });
    const buf = Buffer.from(big);
    expect(buf.length).toBeGreaterThan(1024 * 1024);
    const f = failure(parseWire(buf));
    expect(f.error.code).toBe('VALIDATION_FAILED');
    expect(f.error.stage).toBe(1);
    expect(f.correlation).toBeNull();
  });

  it('accepts a frame of exactly 1 MiB', () => {
    expect(MAX_MESSAGE_BYTES).toBe(1024 * 1024);
    const base = JSON.stringify({ topic: 't', correlation: 'c1', arguments: { s: '' } });
    const padded = base.replace('"s":""', `"s":"${'x'.repeat(MAX_MESSAGE_BYTES - base.length)}"`);
    const buf = Buffer.from(padded);
    expect(buf.length).toBe(MAX_MESSAGE_BYTES);
    expect(parseWire(buf).ok).toBe(true);
  });

  it('rejects invalid UTF-8 bytes', () => {
    const prefix = Buffer.from('{"topic":"t","correlation":"c1","arguments":{"s":"');
    const suffix = Buffer.from('"}}');
    const buf = Buffer.concat([prefix, Buffer.from([0xff, 0xfe, 0xc3]), suffix]);
    const f = expectStage1(parseWire(buf), 'message');
    expect(f.error.message).toMatch(/UTF-8/);
    expect(f.correlation).toBeNull();
  });

  it('rejects non-JSON', () => {
    expectStage1(parseWire(frame('{"topic": "t", ')), 'message');
    expectStage1(parseWire(frame('hello')), 'message');
    expectStage1(parseWire(Buffer.alloc(0)), 'message');
  });

  it('rejects JSON that is not an object', () => {
    for (const text of ['[]', '[{"topic":"t","correlation":"c"}]', '42', 'null', '"str"', 'true']) {
      expectStage1(parseWire(frame(text)), 'message');
    }
  });

  it('rejects missing or invalid correlation', () => {
    const bad: unknown[] = [undefined, '', 'x'.repeat(129), 'has space', 'semi;colon', 'slash/no', 'ünïcode', 42, null, ['a']];
    for (const correlation of bad) {
      const f = expectStage1(parseWire(frame({ topic: 't', correlation, arguments: {} })), 'correlation');
      expect(f.correlation).toBeNull();
    }
  });

  it('rejects an empty, overlong or non-string topic, keeping the correlation', () => {
    const bad: unknown[] = [undefined, '', 'x'.repeat(257), 7, null, { a: 1 }, ['t']];
    for (const topic of bad) {
      const f = expectStage1(parseWire(frame({ topic, correlation: 'corr-1', arguments: {} })), 'topic');
      expect(f.correlation).toBe('corr-1');
    }
    expect(parseWire(frame({ topic: 'x'.repeat(256), correlation: 'c' })).ok).toBe(true);
  });

  it('rejects arguments that are not a JSON object, keeping correlation and topic', () => {
    for (const args of [[], [1, 2], 'text', 5, null, true]) {
      const f = expectStage1(parseWire(frame({ topic: 'tool.invoke.echo', correlation: 'corr-2', arguments: args })), 'arguments');
      expect(f.correlation).toBe('corr-2');
      expect(f.topic).toBe('tool.invoke.echo');
    }
  });
});
