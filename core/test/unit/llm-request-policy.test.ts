// The LLM proxy's request policy: only Claude Code's model calls, checked on the raw
// request (no resolution of dot segments or percent-encoding), only allow-listed
// headers, only configured models and max_tokens.
import { describe, expect, it } from '@jest/globals';
import { checkBody, checkTarget, forwardedHeaders, isRefusal, type Refusal } from '../../src/llm/request-policy.js';

const refused = (value: unknown): Refusal => {
  if (!isRefusal(value)) throw new Error(`expected a refusal, got ${JSON.stringify(value)}`);
  return value;
};

describe('checkTarget', () => {
  it('lets through what Claude Code calls: POST /v1/messages (with ?beta=true) and count_tokens', () => {
    expect(checkTarget('POST', '/v1/messages?beta=true')).toEqual({ path: '/v1/messages', query: 'beta=true' });
    expect(checkTarget('POST', '/v1/messages')).toEqual({ path: '/v1/messages', query: '' });
    expect(checkTarget('POST', '/v1/messages/count_tokens?beta=true')).toEqual({ path: '/v1/messages/count_tokens', query: 'beta=true' });
  });

  it.each([
    ['GET', '/v1/models', 404],
    ['GET', '/v1/files', 404],
    ['DELETE', '/v1/files/file_123', 404],
    ['POST', '/v1/messages/batches', 404],
    ['GET', '/v1/messages/batches/msgbatch_1/results', 404],
    ['GET', '/v1/organizations/me', 404],
    ['POST', '/v1/complete', 404],
    ['POST', '/admin', 404],
    ['GET', '/v1/messages', 405],
    ['DELETE', '/v1/messages', 405],
    ['PUT', '/v1/messages', 405],
  ])('refuses %s %s', (method, url, status) => {
    expect(refused(checkTarget(method, url)).status).toBe(status);
  });

  it.each([
    '/v1/../admin/x',
    '/v1/messages/../messages',
    '/v1/./messages',
    '/v1/%2e%2e/admin/x',
    '/v1/%2E%2E/admin',
    '/v1/messages%2fbatches',
    '/v1/messages%3Fx',
    '/v1/mess%61ges',
    '/v1//messages',
    '//v1/messages',
    '/v1\\messages',
    '/v1/messages/.',
    '/v1/messages;x',
    'http://evil.example/v1/messages',
    '*',
    '',
  ])('refuses the encoded, dotted or odd path %j as malformed, before any resolution', (url) => {
    // 400, not the 404 of an unknown path: the raw form itself is refused, whatever it would resolve to.
    expect(refused(checkTarget('POST', url))).toMatchObject({ status: 400, type: 'invalid_request_error' });
  });

  it('refuses a trailing slash as an unknown path', () => {
    expect(refused(checkTarget('POST', '/v1/messages/')).status).toBe(404);
  });

  it('refuses any query string but beta=true', () => {
    for (const q of ['beta=false', 'beta=true&x=1', 'x', 'beta=true#', 'beta=true?']) expect(refused(checkTarget('POST', `/v1/messages?${q}`)).status).toBe(400);
  });
});

describe('forwardedHeaders', () => {
  it('forwards the headers Claude Code sends that the API uses, and never a credential or a made-up header', () => {
    const h = forwardedHeaders({
      'x-api-key': 'carapace-session-token',
      authorization: 'Bearer carapace-session-token',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219,oauth-2025-04-20',
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': 'claude-cli/2.1.330 (external, sdk-cli)',
      'x-app': 'cli',
      'x-stainless-retry-count': '0',
      'x-claude-code-session-id': 'abc',
      host: 'localhost',
      connection: 'keep-alive',
      'accept-encoding': 'gzip',
      'content-length': '10',
      'transfer-encoding': 'chunked',
      'anthropic-dangerous-direct-browser-access': 'true',
      'x-forwarded-for': '1.2.3.4',
      'x-anthropic-organization': 'org_other',
      cookie: 'a=b',
      'anthropic-beta-extra': 'x',
    });
    expect([...h.keys()].sort()).toEqual(['accept', 'anthropic-beta', 'anthropic-version', 'content-type', 'user-agent', 'x-app', 'x-claude-code-session-id', 'x-stainless-retry-count']);
  });

  it('drops an oversized value', () => {
    expect(forwardedHeaders({ 'anthropic-beta': 'x'.repeat(5000) }).has('anthropic-beta')).toBe(false);
  });
});

describe('checkBody', () => {
  const policy = { models: ['claude-opus-5-5', 'claude-haiku-4-5'], max_tokens: 128_000 };
  const messages = { path: '/v1/messages', query: 'beta=true' };
  const body = (value: unknown) => Buffer.from(JSON.stringify(value));

  it('accepts an allowed model within max_tokens', () => {
    expect(checkBody(messages, body({ model: 'claude-opus-5-5', max_tokens: 128_000, messages: [] }), policy)).toMatchObject({ model: 'claude-opus-5-5' });
    expect(checkBody({ path: '/v1/messages/count_tokens', query: '' }, body({ model: 'claude-haiku-4-5', messages: [] }), policy)).toMatchObject({ model: 'claude-haiku-4-5' });
  });

  it('sends on exactly what it checked: a duplicate key cannot mean one model here and another upstream', () => {
    const raw = Buffer.from('{"model":"claude-opus-4-1","max_tokens":10,"model":"claude-opus-5-5"}');
    const checked = checkBody(messages, raw, policy);
    // Its worst case: the bytes sent (at most a token each) and max_tokens.
    expect(checked).toEqual({ model: 'claude-opus-5-5', body: '{"model":"claude-opus-5-5","max_tokens":10}', promptTokens: 43, maxTokens: 10 });
  });

  it('refuses another model, naming the allowed ones, in the API error format', () => {
    const r = refused(checkBody(messages, body({ model: 'claude-opus-4-1', max_tokens: 10 }), policy));
    expect(r).toMatchObject({ status: 400, type: 'invalid_request_error' });
    expect(r.message).toContain('claude-opus-4-1');
    expect(r.message).toContain('claude-opus-5-5, claude-haiku-4-5');
    expect(refused(checkBody(messages, body({ max_tokens: 10 }), policy)).status).toBe(400);
    expect(refused(checkBody(messages, body({ model: ['claude-opus-5-5'], max_tokens: 10 }), policy)).status).toBe(400);
  });

  it('refuses max_tokens above the ceiling, or missing, or not a positive integer', () => {
    expect(refused(checkBody(messages, body({ model: 'claude-opus-5-5', max_tokens: 128_001 }), policy)).message).toContain('128000');
    for (const max of [undefined, 0, -1, 1.5, '100', null, 1e300]) expect(refused(checkBody(messages, body({ model: 'claude-opus-5-5', max_tokens: max }), policy)).status).toBe(400);
  });

  it('refuses a body that is not a JSON object', () => {
    for (const raw of ['', 'not json', '[1]', 'null', '"x"', '{"model":"claude-opus-5-5",', '\u0000']) {
      expect(refused(checkBody(messages, Buffer.from(raw), policy))).toMatchObject({ status: 400, type: 'invalid_request_error' });
    }
  });
});
