// Attacks on the LLM proxy from inside a real agent container: raw HTTP over the session's
// llm.sock with its session token (what issue 10 measured), and the real Claude Code CLI
// meeting a spent budget. The model stand-in records what reached "upstream": nothing
// forbidden may. Needs the carapace-agent image.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { eventually, Stack } from '../harness.js';
import { newAgentManager, testRuntime } from '../support/agents.js';
import { AnthropicStandIn, type RecordedRequest } from '../support/anthropic-standin.js';

const REAL_KEY = 'sk-ant-api03-REAL-KEY-LLM-ATTACKS-0123456789abcdef';
const MODEL = 'claude-haiku-4-5';
const EDGE_BUDGET = 200_000;
let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;

beforeAll(async () => {
  stack = await Stack.start({ plugins: ['echo'], config: { groups: { family: {}, tight: {}, edge: {}, dollars: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  manager = newAgentManager(stack, {
    upstream,
    apiKey: REAL_KEY,
    agents: { run_timeout_ms: 60_000 },
    instance: `llm-attacks-${process.pid}`,
    runtime,
    groups: ['family', 'tight', 'edge', 'dollars'],
    // "tight": less than any request's worst case, it can make none. "edge": room for Claude
    // Code's first request (its worst case is ~177k) and a few more. "dollars": $1 a month,
    // less than Claude Code's first request may cost (max_tokens 128000 at Opus' $20/M).
    llm: { group_budgets: { tight: { tokens_per_day: 19 }, edge: { tokens_per_day: EDGE_BUDGET }, dollars: { usd_per_month: 1 } }, max_concurrent_requests: 16 },
  });
  await manager.removeOrphans();
  await manager.enqueue('family', 'warm up');
  await manager.enqueue('edge', 'warm up');
  await manager.enqueue('dollars', 'warm up'); // refused: the container stays, for the attacks
}, 120_000);

afterAll(async () => {
  await manager?.stop();
  await standIn?.stop();
  await stack?.stop();
});

interface Attack {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Hang up after the first bytes of the answer. */
  hangUp?: boolean;
}

/**
 * Sends each request over $ANTHROPIC_UNIX_SOCKET with the session token, from node inside
 * the container, as uid 1000; the path goes on the wire exactly as written.
 */
async function attack(group: string, attacks: Attack[], parallel = false): Promise<Array<{ status: number; body: string }>> {
  const container = manager.live(group)!.container;
  const script = `
    const http = require('http');
    const attacks = JSON.parse(Buffer.from(process.argv[1], 'base64').toString());
    (async () => {
      const send = (a) => new Promise((resolve) => {
        const payload = a.body === undefined ? '' : typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
        const req = http.request({ socketPath: process.env.ANTHROPIC_UNIX_SOCKET, path: a.path, method: a.method,
          headers: { 'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...(a.headers || {}) } }, (res) => {
          let t = '';
          res.on('data', (c) => { t += c; if (a.hangUp) { res.destroy(); resolve({ status: res.statusCode, body: 'hung up' }); } });
          res.on('end', () => resolve({ status: res.statusCode, body: t }));
        });
        req.on('error', (e) => resolve({ status: 0, body: String(e) }));
        req.end(payload);
      });
      const out = [];
      if (${parallel}) out.push(...await Promise.all(attacks.map(send)));
      else for (const a of attacks) out.push(await send(a));
      console.log(JSON.stringify(out));
    })();`;
  const encoded = Buffer.from(JSON.stringify(attacks)).toString('base64');
  const r = await runtime.exec(container, ['node', '-e', script, encoded], 30_000);
  expect(r.exitCode).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
}

const message = (over: Record<string, unknown> = {}) => ({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], ...over });

/** What may reach upstream at all: Claude Code's model call, with an allowed model. */
function expectOnlyModelCalls(requests: RecordedRequest[]): void {
  for (const r of requests) {
    expect(r.method).toBe('POST');
    expect(r.path).toBe('/v1/messages');
    expect(['', 'beta=true']).toContain(r.query);
    expect(['claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-haiku-4-5']).toContain(r.body?.model);
    expect(r.body?.max_tokens).toBeLessThanOrEqual(128_000);
    expect(r.headers['x-api-key']).toBe(REAL_KEY);
    for (const name of Object.keys(r.headers)) expect(name).not.toMatch(/^(cookie|x-anthropic-organization|x-forwarded-for|anthropic-dangerous-direct-browser-access|x-evil)$/);
  }
}

describe('the LLM proxy, attacked from inside an agent container', () => {
  it('refuses every endpoint but the model call (issue 10: models, files, batches, organizations), and none reaches upstream', async () => {
    const before = standIn.requests.length;
    const results = await attack('family', [
      { method: 'GET', path: '/v1/models' },
      { method: 'GET', path: '/v1/files' },
      { method: 'DELETE', path: '/v1/files/file_011CNha8iCJcU1wXNR6q4V8w' },
      { method: 'POST', path: '/v1/messages/batches', body: { requests: [{ custom_id: 'a', params: message() }] } },
      { method: 'GET', path: '/v1/messages/batches' },
      { method: 'GET', path: '/v1/organizations/me' },
      { method: 'POST', path: '/v1/organizations/api_keys', body: { name: 'stolen' } },
      { method: 'GET', path: '/v1/messages' },
      { method: 'POST', path: '/v1/complete', body: { model: MODEL, prompt: 'x', max_tokens_to_sample: 5 } },
    ]);
    for (const r of results) {
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(JSON.parse(r.body)).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } });
    }
    expect(standIn.requests.slice(before)).toEqual([]);
  });

  it('refuses dot segments and percent-encoding before any resolution: nothing arrives as /admin', async () => {
    const before = standIn.requests.length;
    const results = await attack('family', [
      { method: 'POST', path: '/v1/../admin/x', body: message() },
      { method: 'POST', path: '/v1/%2e%2e/admin/x', body: message() },
      { method: 'POST', path: '/v1/%2E%2E/%2E%2E/admin', body: message() },
      { method: 'POST', path: '/v1/messages/../../admin', body: message() },
      { method: 'POST', path: '/v1/./messages', body: message() },
      { method: 'POST', path: '/v1/messages%2f..%2f..%2fadmin', body: message() },
      { method: 'POST', path: '/v1//messages', body: message() },
      { method: 'POST', path: '/v1\\..\\admin', body: message() },
      { method: 'POST', path: '/v1/messages?beta=true&x=../../admin', body: message() },
    ]);
    expect(results.map((r) => r.status)).toEqual(Array(results.length).fill(400));
    expect(standIn.requests.slice(before)).toEqual([]);
  });

  it('refuses other models, a huge max_tokens and a body that is not JSON; strips made-up headers', async () => {
    const before = standIn.requests.length;
    const results = await attack('family', [
      { method: 'POST', path: '/v1/messages', body: message({ model: 'claude-opus-4-1' }) },
      { method: 'POST', path: '/v1/messages', body: message({ model: 'claude-3-opus-20240229' }) },
      { method: 'POST', path: '/v1/messages', body: message({ max_tokens: 1_000_000 }) },
      { method: 'POST', path: '/v1/messages', body: 'model=claude-haiku-4-5&max_tokens=5' },
      { method: 'POST', path: '/v1/messages?beta=true', body: message(), headers: { 'x-anthropic-organization': 'org_x', cookie: 'a=b', 'x-forwarded-for': '1.1.1.1', 'x-evil': '1', 'anthropic-dangerous-direct-browser-access': 'true' } },
    ]);
    expect(results.map((r) => r.status)).toEqual([400, 400, 400, 400, 200]);
    expect(JSON.parse(results[0].body).error.message).toContain('is not allowed here');
    expect(standIn.requests.length).toBe(before + 1);
    expectOnlyModelCalls(standIn.requests);
  });

  it('holds a flood of 2000 connections to at most 32 at once, and serves again once it ends', async () => {
    const container = manager.live('family')!.container;
    const script = `
      const net = require('net');
      const sockets = []; let closed = 0, opened = 0;
      for (let i = 0; i < 2000; i++) {
        const s = net.connect(process.env.ANTHROPIC_UNIX_SOCKET, () => opened++);
        s.on('close', () => closed++); s.on('error', () => {});
        sockets.push(s);
      }
      const until = Date.now() + 20000;
      const wait = () => (closed >= 2000 - 32 || Date.now() > until) ? (console.log(JSON.stringify({ closed, open: 2000 - closed })), sockets.forEach((s) => s.destroy())) : setTimeout(wait, 50);
      setTimeout(wait, 50);`;
    const r = await runtime.exec(container, ['node', '-e', script], 30_000);
    // Claude Code's own keep-alive connection may hold one of the 32.
    const { open } = JSON.parse(r.stdout.trim()) as { closed: number; open: number };
    expect(open).toBeGreaterThanOrEqual(31);
    expect(open).toBeLessThanOrEqual(32);
    const [after] = await attack('family', [{ method: 'POST', path: '/v1/messages', body: message() }]);
    expect(after.status).toBe(200);
  }, 60_000);

  it('holds a group to its daily budget, worst case first: the real Claude Code CLI and a raw request are both refused, and the CLI shows why', async () => {
    // 19 tokens: less than any request's worst case (its input and max_tokens), so none fits.
    const before = standIn.requests.length;
    const refused = await manager.enqueue('tight', 'hello');
    expect(refused.ok).toBe(false);
    expect(refused.output).toContain('model tokens left today, less than this request may use');
    // eslint-disable-next-line no-console
    console.log(`What Claude Code showed: ${refused.output}`);
    const [raw] = await attack('tight', [{ method: 'POST', path: '/v1/messages', body: message() }]);
    expect(raw.status).toBe(429);
    expect(JSON.parse(raw.body)).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    expect(standIn.requests.length).toBe(before);
    const told = stack.core.audit.query({ group: 'tight' }).filter((e) => e.code === 'LLM_BUDGET_EXHAUSTED' && e.reason?.endsWith('the user was told'));
    expect(told).toHaveLength(1);
  }, 120_000);

  it('budgets hold whatever the agent does with its raw socket: a hang-up before the final figures is metered as billed; 10 requests in parallel at the edge stay within the budget', async () => {
    const tokens = () => stack.core.audit.query({ group: 'edge' }).filter((e) => e.stage === 'llm' && e.reason?.startsWith('status 200'));
    const output = (e: { reason?: string }) => Number(/output_tokens (\d+)/.exec(e.reason ?? '')?.[1] ?? 0);
    const input = (e: { reason?: string }) => Number(/; input_tokens (\d+)/.exec(e.reason ?? '')?.[1] ?? 0);
    standIn.usage = { input_tokens: 1000, output_tokens: 30_000 };
    try {
      // The agent reads the first bytes of the stream, then hangs up before message_delta.
      standIn.pauseBeforeDeltaMs = 300;
      const before = tokens().length;
      const [hung] = await attack('edge', [{ method: 'POST', path: '/v1/messages', body: message({ max_tokens: 32_000, stream: true }), hangUp: true }]);
      expect(hung).toMatchObject({ status: 200, body: 'hung up' });
      const metered = await eventually(async () => tokens().slice(before).find((e) => e.reason?.includes('the agent hung up')));
      expect(output(metered)).toBe(30_000); // what the stand-in billed
      standIn.pauseBeforeDeltaMs = 0;

      // What is left now, and how many worst cases fit in it.
      const used = tokens().reduce((n, e) => n + input(e) + output(e), 0);
      const body = message({ max_tokens: 32_000 });
      const worst = Buffer.byteLength(JSON.stringify(body)) + 32_000;
      standIn.delayMs = 300; // all ten in flight together
      const results = await attack('edge', Array.from({ length: 10 }, () => ({ method: 'POST', path: '/v1/messages', body })), true);
      const admitted = results.filter((r) => r.status === 200).length;
      expect(admitted).toBe(Math.floor((EDGE_BUDGET - used) / worst));
      expect(results.filter((r) => r.status === 429)).toHaveLength(10 - admitted);
      const billed = tokens().reduce((n, e) => n + input(e) + output(e), 0);
      expect(billed).toBe(used + admitted * 31_000);
      expect(billed).toBeLessThanOrEqual(EDGE_BUDGET);
    } finally {
      standIn.usage = { input_tokens: 12, output_tokens: 7 };
      standIn.pauseBeforeDeltaMs = 0;
      standIn.delayMs = 0;
    }
  }, 60_000);

  it('a month\'s money budget holds the same way: a hang-up before the final figures is charged what the prices make of the bill; 10 in parallel at the edge stay within $1', async () => {
    const billed = () => stack.core.audit.query({ group: 'dollars' }).filter((e) => e.stage === 'llm' && e.reason?.startsWith('status 200'));
    const micros = (e: { reason?: string }) => Math.round(Number(/cost_usd ([\d.]+)/.exec(e.reason ?? '')?.[1] ?? 0) * 1e6);
    standIn.usage = { input_tokens: 1000, output_tokens: 30_000 };
    const perRequest = 1000 * 1 + 30_000 * 5; // claude-haiku-4-5: $1 in, $5 out per million
    try {
      expect(billed()).toHaveLength(0); // Claude Code's own first request did not fit
      standIn.pauseBeforeDeltaMs = 300;
      const [hung] = await attack('dollars', [{ method: 'POST', path: '/v1/messages', body: message({ max_tokens: 32_000, stream: true }), hangUp: true }]);
      expect(hung).toMatchObject({ status: 200, body: 'hung up' });
      const metered = await eventually(async () => billed().find((e) => e.reason?.includes('the agent hung up')));
      expect(micros(metered)).toBe(perRequest);
      standIn.pauseBeforeDeltaMs = 0;

      const body = message({ max_tokens: 32_000 });
      const worst = Buffer.byteLength(JSON.stringify(body)) * 2 + 32_000 * 5;
      standIn.delayMs = 300;
      const results = await attack('dollars', Array.from({ length: 10 }, () => ({ method: 'POST', path: '/v1/messages', body })), true);
      const admitted = results.filter((r) => r.status === 200).length;
      expect(admitted).toBe(Math.floor((1_000_000 - perRequest) / worst));
      expect(JSON.parse(results.find((r) => r.status === 429)!.body).error.message).toContain('of its $1.00 model budget left this month');
      const spent = billed().reduce((n, e) => n + micros(e), 0);
      expect(spent).toBe((admitted + 1) * perRequest);
      expect(spent).toBeLessThanOrEqual(1_000_000);
    } finally {
      standIn.usage = { input_tokens: 12, output_tokens: 7 };
      standIn.pauseBeforeDeltaMs = 0;
      standIn.delayMs = 0;
    }
  }, 60_000);
});
