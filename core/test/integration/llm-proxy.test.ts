// The LLM proxy: the session token is swapped for the real key, streaming passes
// through, usage is audited, and nothing else gets through.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../src/audit/audit-log.js';
import { startAdminApi } from '../../src/admin/http-api.js';
import { parseConfig } from '../../src/config.js';
import { LlmProxy, type LlmSession } from '../../src/llm/llm-proxy.js';
import { UsageStore, type StoreProblem } from '../../src/llm/usage-store.js';
import { Stack, until } from '../harness.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';

const REAL_KEY = 'sk-ant-api03-real-key-never-in-a-container';
const MODEL = 'claude-haiku-4-5';
let dir: string;
let standIn: AnthropicStandIn;
let audit: AuditLog;
let proxy: LlmProxy;
let session: LlmSession;
let standInUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cp-llm-'));
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'hello from the model' }]);
  const upstream = await standIn.start();
  standInUrl = upstream;
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

/** Any method, path and body (a string is sent as is; undefined sends none). */
function call(socketPath: string, method: string, path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    const req = request({ socketPath, path, method, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)), 'anthropic-version': '2023-06-01', ...headers } }, (res) => {
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
    const r = await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': session.token });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).content[0].text).toBe('hello from the model');
    const seen = standIn.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(REAL_KEY);
    expect(JSON.stringify(seen.headers)).not.toContain(session.token);
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('streams server-sent events through and audits token usage', async () => {
    const r = await post('/v1/messages', { model: MODEL, max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${session.token}` });
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

  it('forwards only allow-listed headers, and the query Claude Code uses', async () => {
    const r = await post('/v1/messages?beta=true', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, {
      'x-api-key': session.token,
      authorization: `Bearer ${session.token}`,
      'anthropic-beta': 'claude-code-20250219',
      'x-stainless-retry-count': '0',
      'x-anthropic-organization': 'org_someone_else',
      'x-forwarded-for': '10.0.0.1',
      cookie: 'session=stolen',
    });
    expect(r.status).toBe(200);
    const seen = standIn.requests.at(-1)!;
    expect(seen).toMatchObject({ method: 'POST', path: '/v1/messages', query: 'beta=true' });
    expect(seen.headers['anthropic-beta']).toBe('claude-code-20250219');
    expect(seen.headers['x-stainless-retry-count']).toBe('0');
    expect(seen.headers['x-api-key']).toBe(REAL_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    for (const name of ['x-anthropic-organization', 'x-forwarded-for', 'cookie']) expect(seen.headers[name]).toBeUndefined();
  });

  it('with an OAuth credential, sends it as a bearer token with the beta the API needs for it', async () => {
    const oauth = new LlmProxy({ upstream: standInUrl, credential: { oauthToken: 'sk-ant-oat01-real-oauth-token' }, audit });
    const s = await oauth.open('agent-oauth', 'family', join(dir, 'oauth.sock'));
    try {
      const r = await post('/v1/messages?beta=true', { model: MODEL, max_tokens: 10, messages: [] }, { 'x-api-key': s.token, 'anthropic-beta': 'claude-code-20250219' }, s.socketPath);
      expect(r.status).toBe(200);
      const seen = standIn.requests.at(-1)!;
      expect(seen.headers.authorization).toBe('Bearer sk-ant-oat01-real-oauth-token');
      expect(seen.headers['x-api-key']).toBeUndefined();
      expect(seen.headers['anthropic-beta']).toBe('claude-code-20250219,oauth-2025-04-20');
    } finally {
      await oauth.close('agent-oauth');
    }
  });

  it.each([
    ['GET', '/v1/models'],
    ['GET', '/v1/files'],
    ['DELETE', '/v1/files/file_1'],
    ['POST', '/v1/messages/batches'],
    ['GET', '/v1/organizations/me/api_keys'],
    ['POST', '/v1/../admin/x'],
    ['POST', '/v1/%2e%2e/admin/x'],
    ['POST', '/v1/messages/%2e%2e/%2e%2e/admin'],
    ['POST', '/v1//messages'],
  ])('refuses %s %s with an API-format error, and nothing reaches upstream', async (method, path) => {
    const before = standIn.requests.length;
    // GET and DELETE as an SDK sends them: without a body.
    const r = await call(session.socketPath, method, path, method === 'POST' ? { model: MODEL, max_tokens: 10, messages: [] } : undefined, { 'x-api-key': session.token });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } });
    expect(standIn.requests.length).toBe(before);
  });

  it('refuses other models, max_tokens above the ceiling, and bodies that are not JSON', async () => {
    const before = standIn.requests.length;
    const other = await post('/v1/messages', { model: 'claude-opus-4-1', max_tokens: 10, messages: [] }, { 'x-api-key': session.token });
    expect(other.status).toBe(400);
    expect(JSON.parse(other.text)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(JSON.parse(other.text).error.message).toContain('claude-opus-4-1');
    expect((await post('/v1/messages', { model: MODEL, max_tokens: 128_001, messages: [] }, { 'x-api-key': session.token })).status).toBe(400);
    expect((await call(session.socketPath, 'POST', '/v1/messages', 'model=claude-haiku-4-5', { 'x-api-key': session.token })).status).toBe(400);
    expect(standIn.requests.length).toBe(before);
    // Audited (the first of a run of refusals whole; the rest summarised when the window ends).
    expect(audit.query({ session: 'agent-1' }).filter((e) => e.stage === 'llm' && e.outcome === 'rejected' && e.code === 'LLM_REQUEST_REFUSED').length).toBeGreaterThan(0);
  });

  it('summarises a flood of refusals: the first written whole, the rest counted', async () => {
    const flooder = await proxy.open('agent-flood', 'family', join(dir, 'flood.sock'));
    try {
      for (let i = 0; i < 200; i++) expect((await post(`/v1/messages?i=${i}`, {}, { 'x-api-key': `guess-${i}` }, flooder.socketPath)).status).toBe(401);
      const refusals = audit.query({ session: 'agent-flood' }).filter((e) => e.outcome === 'rejected');
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatchObject({ stage: 'llm', code: 'LLM_REQUEST_REFUSED', reason: 'invalid session token' });
    } finally {
      await proxy.close('agent-flood');
    }
  });
});

describe('LLM proxy: a check before the first answer', () => {
  const message = { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
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

describe('LLM proxy: budgets per group', () => {
  // The stand-in counts 12 input + 7 output tokens per answer.
  const message = { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
  let n = 0;
  const settings = (over: Record<string, unknown>) => parseConfig({ llm: over }).llm;
  /** Every budget refusal, as the agent manager hears it (its turns then wait). */
  const held: Array<{ group: string; seconds: number }> = [];
  /** A proxy of its own (with `store`), one session per group, closed afterwards. */
  async function withProxy(
    options: { settings: ReturnType<typeof settings>; store?: UsageStore; now?: () => number },
    body: (ask: (group: string, path?: string) => Promise<{ status: number; text: string; headers: Record<string, unknown> }>, notices: Array<{ group: string; text: string }>, p: LlmProxy) => Promise<void>,
  ): Promise<void> {
    const notices: Array<{ group: string; text: string }> = [];
    const p = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit, settings: options.settings, usage: options.store, now: options.now, notify: (group, text) => notices.push({ group, text }), overBudget: (group, seconds) => held.push({ group, seconds }) });
    const sessions = new Map<string, LlmSession & { id: string }>();
    const ask = async (group: string, path = '/v1/messages') => {
      let s = sessions.get(group);
      if (!s) {
        const id = `agent-budget-${++n}`;
        s = { ...(await p.open(id, group, join(dir, `${id}.sock`))), id };
        sessions.set(group, s);
      }
      return post(path, message, { 'x-api-key': s.token }, s.socketPath);
    };
    try {
      await body(ask, notices, p);
    } finally {
      for (const s of sessions.values()) await p.close(s.id);
    }
  }

  // Budgets are worst-case: a request is admitted only if its input (at most a token per
  // byte) and max_tokens fit what is left; it is then charged what it really cost (19).
  const WORST = Buffer.byteLength(JSON.stringify(message)) + message.max_tokens;

  it('refuses a group past its tokens for the day with an API-format 429, tells its user once, and audits it', async () => {
    const budget = WORST + 48; // admits a request while 19k + WORST fits: 0, 19 and 38 used, not 57
    await withProxy({ settings: settings({ budget: { tokens_per_day: budget } }) }, async (ask, notices, p) => {
      const before = standIn.requests.length;
      for (let i = 0; i < 3; i++) expect((await ask('family')).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        const r = await ask('family');
        expect(r.status).toBe(429);
        expect(r.headers['x-should-retry']).toBe('false');
        const error = JSON.parse(r.text);
        expect(error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
        expect(error.error.message).toContain(`model tokens left today, less than this request may use (${WORST})`);
      }
      expect(standIn.requests.length).toBe(before + 3);
      expect(notices).toEqual([{ group: 'family', text: expect.stringContaining(`"family" has ${budget - 57} of its ${budget} model tokens left today`) }]);
      // Each refusal holds the group's next turns until the day renews (at most a day away).
      const refusals = held.filter((h) => h.group === 'family');
      expect(refusals).toHaveLength(3);
      for (const h of refusals) {
        expect(h.seconds).toBeGreaterThan(0);
        expect(h.seconds).toBeLessThanOrEqual(86_400);
      }
      // Another group has its own budget.
      expect((await ask('work')).status).toBe(200);
      expect(p.usage().find((u) => u.group === 'family')).toMatchObject({ input_tokens: 36, output_tokens: 21, tokens: 57, tokens_per_day: budget, reserved_tokens: 0 });
      const entries = audit.query({ group: 'family' }).filter((e) => e.code === 'LLM_BUDGET_EXHAUSTED');
      expect(entries.length).toBe(1); // the three refusals after it are summarised
      expect(entries[0]).toMatchObject({ stage: 'llm', outcome: 'rejected', reason: expect.stringContaining('; the user was told') });
    });
  });

  it('limits requests per minute, with per-group overrides, and starts afresh the next minute', async () => {
    let clock = Date.UTC(2030, 0, 1, 12, 0, 5);
    await withProxy({ settings: settings({ budget: { requests_per_minute: 3 }, group_budgets: { busy: { requests_per_minute: 1 } } }), now: () => clock }, async (ask, notices) => {
      for (let i = 0; i < 3; i++) expect((await ask('family')).status).toBe(200);
      const r = await ask('family');
      expect(r.status).toBe(429);
      expect(JSON.parse(r.text).error.message).toContain('3 model requests this minute');
      expect((await ask('busy')).status).toBe(200);
      expect((await ask('busy')).status).toBe(429);
      expect((await ask('family')).status).toBe(429);
      // One notice per group for the day, however many refusals.
      expect(notices.map((x) => x.group)).toEqual(['family', 'busy']);
      clock += 60_000;
      expect((await ask('family')).status).toBe(200);
      // Refused requests count too: a flood of bad ones is cut off like any other.
      for (let i = 0; i < 3; i++) expect((await ask('flood', '/v1/models')).status).toBe(404);
      expect((await ask('flood', '/v1/models')).status).toBe(429);
    });
  });

  it('keeps usage in a SQLite file: a restarted proxy still refuses the group, and does not tell the user again', async () => {
    const file = join(dir, 'usage-restart', 'usage.sqlite');
    const limits = settings({ budget: { tokens_per_day: WORST } }); // one request, then 19 + WORST > WORST
    const first = new UsageStore(file);
    await withProxy({ settings: limits, store: first }, async (ask, notices) => {
      expect((await ask('family')).status).toBe(200);
      expect((await ask('family')).status).toBe(429);
      expect(notices).toHaveLength(1);
    });
    first.close();
    const second = new UsageStore(file);
    await withProxy({ settings: limits, store: second }, async (ask, notices, p) => {
      const before = standIn.requests.length;
      expect((await ask('family')).status).toBe(429);
      expect(standIn.requests.length).toBe(before);
      expect(notices).toHaveLength(0);
      // Three requests made (the two refused count too: a flood of them is rate-limited), one answered.
      expect(p.usage()).toEqual([expect.objectContaining({ group: 'family', tokens: 19, requests: 3 })]);
    });
    second.close();
  });

  it('an agent that hangs up before the final usage figures does not stop the meter: metered = billed', async () => {
    standIn.usage = { input_tokens: 1200, output_tokens: 30_000 };
    standIn.pauseBeforeDeltaMs = 300;
    try {
      await withProxy({ settings: settings({}) }, async (_ask, _notices, p) => {
        const id = `agent-budget-${++n}`;
        const s = await p.open(id, 'hangup', join(dir, `${id}.sock`));
        // The agent reads the first bytes of the stream, then closes its connection.
        await new Promise<void>((resolve, reject) => {
          const req = request({ socketPath: s.socketPath, path: '/v1/messages', method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': s.token } }, (res) => {
            res.once('data', () => {
              res.destroy();
              resolve();
            });
          });
          req.on('error', reject);
          req.end(JSON.stringify({ ...message, max_tokens: 32_000, stream: true }));
        });
        const billed = await until(() => p.usage().find((u) => u.group === 'hangup' && u.output_tokens > 1), 5000);
        expect(billed).toMatchObject({ input_tokens: 1200, output_tokens: 30_000, reserved_tokens: 0 });
        await p.close(id);
      });
    } finally {
      standIn.usage = { input_tokens: 12, output_tokens: 7 };
      standIn.pauseBeforeDeltaMs = 0;
    }
  });

  it.each([0, 100])('an answer whose final usage never arrives is charged its whole reservation (cut %i ms in)', async (pause) => {
    standIn.cutBeforeDelta = true;
    standIn.pauseBeforeDeltaMs = pause;
    try {
      await withProxy({ settings: settings({}) }, async (_ask, _notices, p) => {
        const id = `agent-budget-${++n}`;
        const s = await p.open(id, `cut${pause}`, join(dir, `${id}.sock`));
        const body = { ...message, max_tokens: 20_000, stream: true };
        await post('/v1/messages', body, { 'x-api-key': s.token }, s.socketPath).catch(() => undefined);
        const charged = await until(() => p.usage().find((u) => u.group === `cut${pause}` && u.tokens > 0), 5000);
        expect(charged).toMatchObject({ tokens: Buffer.byteLength(JSON.stringify(body)) + 20_000, reserved_tokens: 0 });
        await p.close(id);
      });
    } finally {
      standIn.cutBeforeDelta = false;
      standIn.pauseBeforeDeltaMs = 0;
    }
  });

  it('10 requests in parallel at the edge of the budget: those whose worst case fits run, the rest are refused; billed stays within the budget', async () => {
    standIn.usage = { input_tokens: 1000, output_tokens: 30_000 };
    standIn.delayMs = 200;
    const store = new UsageStore(null);
    store.addUsage('edge', new Date().toISOString().slice(0, 10), { input: 35_000, output: 0, micros: 0 });
    try {
      await withProxy({ settings: settings({ budget: { tokens_per_day: 300_000 }, max_concurrent_requests: 16 }), store }, async (_ask, notices, p) => {
        const id = `agent-budget-${++n}`;
        const s = await p.open(id, 'edge', join(dir, `${id}.sock`));
        const body = { ...message, max_tokens: 32_000 };
        const worst = Buffer.byteLength(JSON.stringify(body)) + 32_000;
        const results = await Promise.all(Array.from({ length: 10 }, () => post('/v1/messages', body, { 'x-api-key': s.token }, s.socketPath)));
        const admitted = results.filter((r) => r.status === 200).length;
        expect(admitted).toBe(Math.floor((300_000 - 35_000) / worst)); // 8
        expect(results.filter((r) => r.status === 429)).toHaveLength(10 - admitted);
        const used = p.usage().find((u) => u.group === 'edge')!;
        expect(used.tokens).toBe(35_000 + admitted * 31_000);
        expect(used.tokens).toBeLessThanOrEqual(300_000);
        expect(used.reserved_tokens).toBe(0);
        // Told once that it is refused, and once that 80% of the day's budget is used.
        expect(notices.map((x) => x.text).sort()).toEqual([expect.stringContaining('model tokens left today'), expect.stringContaining('has used 84% of its model tokens for today')]);
        await p.close(id);
      });
    } finally {
      standIn.usage = { input_tokens: 12, output_tokens: 7 };
      standIn.delayMs = 0;
    }
  });

  it('a month\'s budget, the appliance\'s budget across groups, and one notice at 80%', async () => {
    const day = new Date().toISOString().slice(0, 10);
    const earlier = `${day.slice(0, 7)}-01` === day ? null : `${day.slice(0, 7)}-01`;
    const store = new UsageStore(null);
    // The month: what the group used on an earlier day of it counts (on the 1st, today does).
    store.addUsage('monthly', earlier ?? day, { input: 1000, output: 0, micros: 0 });
    // The appliance admits a request while what all groups used today + WORST fits: at 0 and 19 used, not at 38.
    const limits = settings({ budget: { tokens_per_month: 1000 + WORST - 1 }, appliance_budget: { tokens_per_day: WORST + 30 + (earlier ? 0 : 1000) } });
    await withProxy({ settings: limits, store }, async (ask, notices) => {
      const month = await ask('monthly');
      expect(month.status).toBe(429);
      expect(JSON.parse(month.text).error.message).toContain(`model tokens left this month, less than this request may use (${WORST})`);
      // The appliance: three groups, each far within its own budget, share one.
      expect((await ask('a')).status).toBe(200);
      expect((await ask('b')).status).toBe(200);
      const third = await ask('c');
      expect(third.status).toBe(429);
      expect(JSON.parse(third.text).error.message).toContain('the appliance (all groups together) has');
      expect(notices.some((x) => x.group === 'c' && x.text.includes('the appliance (all groups together) has'))).toBe(true);
    });
    // The notice: once, when a request takes the group past the share (here 1%), not again.
    const store80 = new UsageStore(null);
    await withProxy({ settings: settings({ budget: { tokens_per_day: 10 * WORST }, notice_at_percent: 1 }), store: store80 }, async (ask, notices) => {
      const onePercent = Math.ceil((10 * WORST) / 100);
      for (let used = 0; used < onePercent; used += 19) expect((await ask('eighty')).status).toBe(200);
      expect((await ask('eighty')).status).toBe(200);
      expect(notices.filter((x) => x.text.includes('of its model tokens for today'))).toEqual([{ group: 'eighty', text: expect.stringMatching(/^Carapace: the group "eighty" has used 1% of its model tokens for today/) }]);
    });
  });

  it('a money budget at its edge: 10 in parallel, only the worst cases that fit run; what the usage shows is what the prices make of the upstream\'s figures', async () => {
    standIn.usage = { input_tokens: 1000, output_tokens: 30_000 };
    standIn.delayMs = 200;
    const store = new UsageStore(null);
    store.addUsage('dollars', new Date().toISOString().slice(0, 10), { input: 0, output: 0, micros: 200_000 }); // $0.20 spent
    try {
      await withProxy({ settings: settings({ budget: { usd_per_day: 1 }, max_concurrent_requests: 16 }), store }, async (_ask, notices, p) => {
        const id = `agent-budget-${++n}`;
        const s = await p.open(id, 'dollars', join(dir, `${id}.sock`));
        const body = { ...message, max_tokens: 32_000 };
        // claude-haiku-4-5: $1 in, $5 out per million; the worst case takes every byte at the 1-hour cache write rate ($2).
        const worst = Buffer.byteLength(JSON.stringify(body)) * 2 + 32_000 * 5;
        const billed = 1000 * 1 + 30_000 * 5; // $0.151 a request
        const results = await Promise.all(Array.from({ length: 10 }, () => post('/v1/messages', body, { 'x-api-key': s.token }, s.socketPath)));
        const admitted = results.filter((r) => r.status === 200).length;
        expect(admitted).toBe(Math.floor((1_000_000 - 200_000) / worst)); // 4
        const refusal = JSON.parse(results.find((r) => r.status === 429)!.text).error.message as string;
        expect(refusal).toMatch(/^Carapace: the group "dollars" has \$0\.\d\d of its \$1\.00 model budget left today, less than this request may use \(\$0\.16\)/);
        const used = p.usage().find((u) => u.group === 'dollars')!;
        expect(used.cost_micros).toBe(200_000 + admitted * billed);
        expect(used.cost_micros).toBeLessThanOrEqual(1_000_000);
        expect(used.reserved_micros).toBe(0);
        expect(notices.map((x) => x.text).sort()).toEqual([expect.stringContaining('model budget left today'), 'Carapace: the group "dollars" has used 80% of its model budget for today ($0.80 of $1.00).']);
        await p.close(id);
      });
    } finally {
      standIn.usage = { input_tokens: 12, output_tokens: 7 };
      standIn.delayMs = 0;
    }
  });

  it('a month\'s money budget and the appliance\'s money budget across groups', async () => {
    const day = new Date().toISOString().slice(0, 10);
    const earlier = `${day.slice(0, 7)}-01` === day ? day : `${day.slice(0, 7)}-01`;
    const store = new UsageStore(null);
    store.addUsage('monthly', earlier, { input: 0, output: 0, micros: 999_900 });
    const cost = 12 * 1 + 7 * 5; // what the stand-in bills a request, in µUSD
    const worst = Buffer.byteLength(JSON.stringify(message)) * 2 + message.max_tokens * 5;
    // The appliance admits while what all groups spent today + worst fits: after 0 and 1 requests, not 2.
    const applianceToday = earlier === day ? 999_900 : 0;
    const limits = settings({ budget: { usd_per_month: 1 }, appliance_budget: { usd_per_day: (applianceToday + cost + worst) / 1e6 } });
    await withProxy({ settings: limits, store }, async (ask) => {
      const month = await ask('monthly');
      expect(month.status).toBe(429);
      expect(JSON.parse(month.text).error.message).toContain('has $0.0001 of its $1.00 model budget left this month');
      expect((await ask('a')).status).toBe(200);
      expect((await ask('b')).status).toBe(200);
      const third = await ask('c');
      expect(third.status).toBe(429);
      expect(JSON.parse(third.text).error.message).toContain('the appliance (all groups together) has');
    });
  });

  it('moves a corrupt usage file aside, says so, and counts afresh', () => {
    const file = join(dir, 'usage-corrupt', 'usage.sqlite');
    mkdirSync(join(dir, 'usage-corrupt'));
    writeFileSync(file, 'this is not a database, it is a planted file '.repeat(200));
    const problems: StoreProblem[] = [];
    const store = new UsageStore(file, (p) => problems.push(p));
    expect(problems).toHaveLength(1);
    expect(problems[0].movedTo).toMatch(/usage\.sqlite\.corrupt-/);
    expect(readFileSync(problems[0].movedTo, 'utf8')).toContain('planted file');
    store.addUsage('family', '2030-01-01', { input: 5, output: 6, micros: 0 });
    expect(store.get('family', '2030-01-01')).toMatchObject({ input_tokens: 5, output_tokens: 6 });
    store.close();
  });

  it('serves usage per group on the admin API, behind the admin token', async () => {
    const stack = await Stack.start({ plugins: [] });
    try {
      await withProxy({ settings: settings({ group_budgets: { family: { tokens_per_day: 1000 } } }) }, async (ask, _notices, p) => {
        expect((await ask('family')).status).toBe(200);
        const admin = await startAdminApi(stack.core, '127.0.0.1', 0, 'admin-token-usage', { usage: () => p.usage(['family', 'quiet']) });
        try {
          const base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
          expect((await fetch(`${base}/usage`)).status).toBe(401);
          const r = await fetch(`${base}/usage`, { headers: { authorization: 'Bearer admin-token-usage' } });
          expect(r.status).toBe(200);
          const { groups } = (await r.json()) as { groups: Array<Record<string, unknown>> };
          expect(groups).toEqual([
            expect.objectContaining({ group: 'family', tokens: 19, requests: 1, tokens_per_day: 1000, requests_per_minute: 60, requests_this_minute: 1 }),
            expect.objectContaining({ group: 'quiet', tokens: 0, requests: 0, tokens_per_day: 5_000_000 }),
          ]);
        } finally {
          await admin.close();
        }
      });
    } finally {
      await stack.stop();
    }
  });
});

describe('LLM proxy: bounds on what one agent can hold', () => {
  it('allows a set number of model requests in flight per session', async () => {
    const p = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit, settings: parseConfig({ llm: { max_concurrent_requests: 2 } }).llm });
    const s = await p.open('agent-concurrent', 'family', join(dir, 'concurrent.sock'));
    standIn.delayMs = 500;
    try {
      const results = await Promise.all(Array.from({ length: 5 }, () => post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [] }, { 'x-api-key': s.token }, s.socketPath)));
      expect(results.map((r) => r.status).sort()).toEqual([200, 200, 429, 429, 429]);
    } finally {
      standIn.delayMs = 0;
      await p.close('agent-concurrent');
    }
  });

  it('ends a request whose body never arrives, and refuses a declared body over 32 MB unread', async () => {
    const p = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit, requestTimeoutMs: 1000 });
    const s = await p.open('agent-slow', 'family', join(dir, 'slow.sock'));
    try {
      const before = standIn.requests.length;
      const raw = (head: string) =>
        new Promise<string>((resolve) => {
          const socket = connect(s.socketPath);
          let text = '';
          socket.on('data', (d) => (text += d.toString()));
          socket.on('close', () => resolve(text));
          socket.on('error', () => undefined);
          socket.write(head);
        });
      const slow = await raw(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${s.token}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model":`);
      expect(slow).toMatch(/^HTTP\/1\.1 408/);
      const huge = await raw(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${s.token}\r\ncontent-type: application/json\r\ncontent-length: ${64 * 1024 * 1024}\r\n\r\n{`);
      expect(huge).toMatch(/^HTTP\/1\.1 413/);
      expect(huge).toContain('"request_too_large"');
      expect(standIn.requests.length).toBe(before);
    } finally {
      await p.close('agent-slow');
    }
  });

  it('holds at most a set number of connections per session; the rest are closed at once', async () => {
    const p = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit });
    const s = await p.open('agent-conns', 'family', join(dir, 'conns.sock'));
    const sockets: Socket[] = [];
    try {
      let closed = 0;
      await Promise.all(
        Array.from({ length: 300 }, () =>
          new Promise<void>((resolve) => {
            const socket = connect(s.socketPath, () => resolve());
            socket.on('close', () => closed++);
            socket.on('error', () => resolve());
            sockets.push(socket);
          }),
        ),
      );
      // Closed by the server as they arrive: wait until every one over the bound is.
      for (let i = 0; i < 200 && closed < 300 - 32; i++) await new Promise((r) => setTimeout(r, 10));
      expect(closed).toBe(300 - 32);
      for (const socket of sockets) socket.destroy();
      await new Promise((r) => setTimeout(r, 50));
      expect((await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [] }, { 'x-api-key': s.token }, s.socketPath)).status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
      await p.close('agent-conns');
    }
  });
});

describe('a model API that refuses the credential', () => {
  const refusals = [
    { name: 'a wrong key (401)', status: 401, type: 'authentication_error', message: 'invalid x-api-key', kind: 'key_refused', says: 'the model API refused the key in .env: ANTHROPIC_API_KEY' },
    { name: 'no permission (403)', status: 403, type: 'permission_error', message: 'Your API key does not have permission to use the specified resource.', kind: 'not_permitted', says: 'it is not allowed to do this' },
    { name: 'no credit left (400)', status: 400, type: 'invalid_request_error', message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.', kind: 'no_credit', says: 'has no credit left' },
    { name: 'a model it does not offer (404)', status: 404, type: 'not_found_error', message: `model: ${MODEL}`, kind: 'unknown_model', says: `does not offer the model "${MODEL}"` },
  ];
  for (const refusal of refusals) {
    it(`${refusal.name}: relayed as said, not to be retried, the turn told to end, the health red until a request succeeds`, async () => {
      const told: { session: string; group: string; message: string }[] = [];
      const refusing = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit, refused: (s, g, problem) => told.push({ session: s, group: g, message: problem.message }) });
      const own = await refusing.open('agent-refused', 'family', join(dir, 'refused.sock'));
      try {
        standIn.failWith = refusal;
        const r = await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': own.token }, own.socketPath);
        expect(r.status).toBe(refusal.status);
        expect(JSON.parse(r.text).error.message).toBe(refusal.message);
        expect(r.headers['x-should-retry']).toBe('false');
        expect(told).toEqual([{ session: 'agent-refused', group: 'family', message: expect.stringContaining(refusal.says) }]);
        expect(refusing.modelHealth()).toMatchObject({ ok: false, problem: { kind: refusal.kind, status: refusal.status } });
        await audit.flush();
        expect(readFileSync(join(dir, 'audit.jsonl'), 'utf8')).toContain('"code":"MODEL_REFUSED"');
        standIn.failWith = null;
        const ok = await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': own.token }, own.socketPath);
        expect(ok.status).toBe(200);
        expect(refusing.modelHealth()).toMatchObject({ ok: true, problem: null });
      } finally {
        standIn.failWith = null;
        await refusing.close('agent-refused');
      }
    });
  }

  it('an ordinary 400 (a bad request) is relayed but is not the key\'s fault', async () => {
    const told: string[] = [];
    const plain = new LlmProxy({ upstream: standInUrl, credential: { apiKey: REAL_KEY }, audit, refused: (_s, _g, p) => told.push(p.message) });
    const own = await plain.open('agent-plain', 'family', join(dir, 'plain.sock'));
    try {
      standIn.failWith = { status: 400, type: 'invalid_request_error', message: 'messages: at least one message is required' };
      const r = await post('/v1/messages', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': own.token }, own.socketPath);
      expect(r.status).toBe(400);
      expect(r.headers['x-should-retry']).toBeUndefined();
      expect(told).toEqual([]);
      expect(plain.modelHealth().ok).toBe(true);
    } finally {
      standIn.failWith = null;
      await plain.close('agent-plain');
    }
  });
});
