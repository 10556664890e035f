// The LLM proxy: the session token is swapped for the real key, streaming passes
// through, usage is audited, and nothing else gets through.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../src/audit/audit-log.js';
import { LlmProxy, type LlmSession } from '../../src/llm/llm-proxy.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';

const REAL_KEY = 'sk-ant-api03-real-key-never-in-a-container';
let dir: string;
let standIn: AnthropicStandIn;
let audit: AuditLog;
let proxy: LlmProxy;
let session: LlmSession;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-llm-'));
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'hello from the model' }]);
  const upstream = await standIn.start();
  audit = new AuditLog(join(dir, 'audit.jsonl'), (s) => s);
  proxy = new LlmProxy({ upstream, credential: { apiKey: REAL_KEY }, audit });
  session = await proxy.open('agent-1', 'family', join(dir, 'llm.sock'));
});

afterAll(async () => {
  await proxy.close('agent-1');
  await standIn.stop();
  rmSync(dir, { recursive: true, force: true });
});

function post(path: string, body: unknown, headers: Record<string, string>, socketPath = session.socketPath): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = request({ socketPath, path, method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

describe('LLM proxy', () => {
  it('swaps the session token for the real key and returns the model answer', async () => {
    const r = await post('/v1/messages', { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': session.token });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).content[0].text).toBe('hello from the model');
    const seen = standIn.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(REAL_KEY);
    expect(JSON.stringify(seen.headers)).not.toContain(session.token);
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('streams server-sent events through and audits token usage', async () => {
    const r = await post('/v1/messages', { model: 'm', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${session.token}` });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toContain('text/event-stream');
    expect(r.text).toContain('event: message_start');
    expect(r.text).toContain('hello from the model');
    const entry = audit.query({ session: 'agent-1' }).at(-1);
    expect(entry).toMatchObject({ stage: 'llm', outcome: 'ok', group: 'family' });
    expect(entry?.reason).toContain('input_tokens 12; output_tokens 7');
  });

  it('refuses a wrong or missing token, and paths outside /v1/', async () => {
    const before = standIn.requests.length;
    expect((await post('/v1/messages', {}, { 'x-api-key': 'sk-ant-guess' })).status).toBe(401);
    expect((await post('/v1/messages', {}, {})).status).toBe(401);
    expect((await post('/admin', {}, { 'x-api-key': session.token })).status).toBe(404);
    expect(standIn.requests.length).toBe(before);
  });

  it('summarises a flood of refusals: the first written whole, the rest counted', async () => {
    const flooder = await proxy.open('agent-flood', 'family', join(dir, 'flood.sock'));
    try {
      for (let i = 0; i < 200; i++) expect((await post(`/v1/messages?i=${i}`, {}, { 'x-api-key': `guess-${i}` }, flooder.socketPath)).status).toBe(401);
      const refusals = audit.query({ session: 'agent-flood' }).filter((e) => e.outcome === 'rejected');
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatchObject({ stage: 'llm', code: 'HTTP_401', reason: 'invalid session token' });
    } finally {
      await proxy.close('agent-flood');
    }
  });
});

describe('LLM proxy: a check before the first answer', () => {
  const message = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
  let n = 0;
  /** A session of its own (`id`), with `check` as its beforeFirstAnswer. */
  async function withCheck(check: () => Promise<void>, body: (s: LlmSession, id: string) => Promise<void>): Promise<void> {
    const id = `agent-check-${++n}`;
    const s = await proxy.open(id, 'family', join(dir, `${id}.sock`), { beforeFirstAnswer: check });
    try {
      await body(s, id);
    } finally {
      await proxy.close(id);
    }
  }
  const postTo = (s: LlmSession) => post('/v1/messages', message, { 'x-api-key': s.token }, s.socketPath);

  it('relays the first answer only once the check has passed, and runs the check once', async () => {
    let calls = 0;
    let passedAt = 0;
    await withCheck(
      async () => {
        calls++;
        await new Promise((r) => setTimeout(r, 200));
        passedAt = Date.now();
      },
      async (s) => {
        const first = await postTo(s);
        const answeredAt = Date.now();
        expect(first.status).toBe(200);
        expect(passedAt).toBeGreaterThan(0);
        expect(answeredAt).toBeGreaterThanOrEqual(passedAt);
        expect((await postTo(s)).status).toBe(200);
        expect(calls).toBe(1);
      },
    );
  });

  it('withholds every answer when the check fails', async () => {
    await withCheck(
      () => Promise.reject(new Error('limit not restored')),
      async (s, id) => {
        for (let i = 0; i < 2; i++) {
          const r = await postTo(s);
          expect(r.status).toBe(503);
          expect(r.text).not.toContain('hello from the model');
        }
        const entry = audit.query({ session: id }).at(-1);
        expect(entry).toMatchObject({ stage: 'llm', outcome: 'error' });
        expect(entry?.reason).toContain('answer withheld: limit not restored');
      },
    );
  });
});
