// The whole request path with real parts: the ipc binary, the core's sockets and
// pipeline, a plugin host process and the audit file.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FAULTY_TOKEN, Stack, type IpcResult } from '../harness.js';
import { expectError as expectErrorFields } from '../support/expect-ipc.js';
import type { PendingConfirmation } from '../../src/confirm/confirmations.js';
import type { Session } from '../../src/boundary/session-table.js';

const PLUGINS = ['echo', 'faulty', 'guarded', 'services', 'netfail', 'authfail', 'badconfig', 'crashinit', 'broken'];
const CONFIG = {
  groups: { kids: { tools: ['echo'] } },
  tool_rate_limits: { custom_code: { per_minute: 1, burst: 2 } },
  handler_timeout_ms: 1000,
  confirmation_timeout_ms: 1500,
  // badconfig's settings are there but wrong (a plugin with none at all is only "not configured").
  plugins: { faulty: { api_token: '${FAULTY_TOKEN}' }, badconfig: { endpoint: 42 } },
};

let stack: Stack;
let family: Session;

beforeAll(async () => {
  stack = await Stack.start({ plugins: PLUGINS, config: CONFIG });
  family = await stack.openSession('family');
});

afterAll(async () => {
  await stack?.stop();
});

/** The shared check, and here also: nothing on stdout, and a well-formed error object. */
function expectError(r: IpcResult, code: string, extra: Record<string, unknown> = {}): void {
  expectErrorFields(r, code, extra);
  expect(r.stdout).toBe('');
  expect(typeof r.err.message).toBe('string');
  expect(typeof r.err.retriable).toBe('boolean');
}

describe('happy path', () => {
  it('routes a valid call to the plugin and prints the result, defaults applied', async () => {
    const r = await stack.ipc(family, 'tool.invoke.echo', { text: 'hi' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ echoed: { text: 'hi', count: 1 }, group: 'family', source: family.id });
  });

  it('writes one audit entry per stage decision, all with one correlation', async () => {
    const r = await stack.ipc(family, 'tool.invoke.echo', { text: 'audited' });
    expect(r.code).toBe(0);
    const entries = await stack.auditEntries();
    const routed = entries.find((e) => e.stage === 'route' && e.topic === 'tool.invoke.echo' && entries.some((x) => x.correlation === e.correlation && x.stage === 'response'));
    const mine = entries.filter((e) => e.correlation === routed?.correlation);
    expect(mine.map((e) => e.stage)).toEqual(['envelope', 'topic', 'payload', 'authorize', 'route', 'response']);
    for (const e of mine) {
      expect(e).toMatchObject({ group: 'family', source: expect.any(String), topic: 'tool.invoke.echo', outcome: expect.any(String) });
      expect(Date.parse(e.timestamp)).not.toBeNaN();
    }
    expect(mine.at(-1)?.outcome).toBe('ok');
  });

  it('takes arguments on stdin for large requests', async () => {
    const text = 'y'.repeat(600 * 1024);
    const r = await stack.ipc(family, 'tool.invoke.echo', { text }, { stdin: true });
    expect(r.code).toBe(0);
    expect(r.out.echoed.text).toBe(text);
  });
});

describe('pipeline rejections', () => {
  it('stage 2: unknown tools and non-tool topics', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.nope', {}), 'UNKNOWN_TOOL', { stage: 2, retriable: false });
    expectError(await stack.ipc(family, 'message.inbound', {}), 'UNKNOWN_TOOL', { stage: 2 });
  });

  it('stage 2: tools of a plugin that failed to initialize are unknown', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.netfail_tool', {}), 'UNKNOWN_TOOL', { stage: 2 });
    expectError(await stack.ipc(family, 'tool.invoke.broken_tool', {}), 'UNKNOWN_TOOL', { stage: 2 });
  });

  it('stage 3: undeclared fields, wrong types, missing fields', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.echo', { text: 'a', priority: 1 }), 'VALIDATION_FAILED', {
      stage: 3,
      field: 'priority',
      message: 'additionalProperties "priority" not allowed',
    });
    expectError(await stack.ipc(family, 'tool.invoke.echo', { text: 'a', count: 'x' }), 'VALIDATION_FAILED', { stage: 3, field: 'count' });
    expectError(await stack.ipc(family, 'tool.invoke.echo', {}), 'VALIDATION_FAILED', { stage: 3, field: 'text' });
    expectError(await stack.ipc(family, 'tool.invoke.echo', { text: 'a', nested: { flag: true, evil: 1 } }), 'VALIDATION_FAILED', { field: 'nested.evil' });
  });

  it('stage 3: forged envelope fields and prototype keys are rejected, never applied', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.echo', { text: 'a', group: 'kids', source: 'core' }), 'VALIDATION_FAILED', { field: 'group' });
    expectError(await stack.ipc(family, 'tool.invoke.echo', '{"text":"a","__proto__":{"admin":true}}'), 'VALIDATION_FAILED', { field: '__proto__' });
    expectError(await stack.ipc(family, 'tool.invoke.echo', '{"text":"a","constructor":{"prototype":{}}}'), 'VALIDATION_FAILED', { field: 'constructor' });
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('stage 4: a group may use only its allowed tools', async () => {
    const kids = await stack.openSession('kids');
    expect((await stack.ipc(kids, 'tool.invoke.echo', { text: 'ok' })).code).toBe(0);
    expectError(await stack.ipc(kids, 'tool.invoke.whoami', {}), 'UNAUTHORIZED', { stage: 4, retriable: false });
    // Intrinsics are always allowed.
    expect((await stack.ipc(kids, 'tool.invoke.get_session_info', {})).out.group).toBe('kids');
    await stack.core.closeSession(kids.id);
  });

  it('stage 4: rate limit per session per tool, with retry_after', async () => {
    const s = await stack.openSession('family');
    expectError(await stack.ipc(s, 'tool.invoke.custom_code', {}), 'NOT_FOUND');
    expectError(await stack.ipc(s, 'tool.invoke.custom_code', {}), 'NOT_FOUND');
    const limited = await stack.ipc(s, 'tool.invoke.custom_code', {});
    expectError(limited, 'RATE_LIMITED', { stage: 4, retriable: true });
    expect(limited.err.retry_after).toBeGreaterThanOrEqual(1);
    expect(limited.err.retry_after).toBeLessThanOrEqual(60);
    // Another session has its own bucket.
    const other = await stack.openSession('family');
    expectError(await stack.ipc(other, 'tool.invoke.custom_code', {}), 'NOT_FOUND');
    await stack.core.closeSession(s.id);
    await stack.core.closeSession(other.id);
  });
});

describe('stage 5: confirmation of high-risk tools', () => {
  const targets = (target: string) => (p: PendingConfirmation) => p.arguments.target === target;

  it('holds the request until approved', async () => {
    const call = stack.ipc(family, 'tool.invoke.delete_everything', { target: 'approve-me' });
    const pending = await stack.pendingConfirmation('family', targets('approve-me'));
    expect(pending).toMatchObject({ group: 'family', tool: 'delete_everything', session: family.id });
    expect(stack.core.confirmations.resolve(pending.id, true, 'test')).toBe(true);
    const r = await call;
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ deleted: 'approve-me' });
  });

  it('returns CONFIRMATION_DENIED when denied', async () => {
    const call = stack.ipc(family, 'tool.invoke.delete_everything', { target: 'deny-me' });
    await stack.answerConfirmation('family', targets('deny-me'), false);
    expectError(await call, 'CONFIRMATION_DENIED', { stage: 5, retriable: false });
  });

  it('returns CONFIRMATION_TIMEOUT when nobody answers, and cleans up', async () => {
    const r = await stack.ipc(family, 'tool.invoke.delete_everything', { target: 'ignore-me' });
    expectError(r, 'CONFIRMATION_TIMEOUT', { stage: 5, retriable: true });
    expect(stack.core.confirmations.list('family').find(targets('ignore-me'))).toBeUndefined();
  });
});

describe('stage 6 and handler errors', () => {
  it('RESULT_UNKNOWN (not retriable) when a handler is too slow and does not stop when aborted', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.slow', { ms: 3000 }), 'RESULT_UNKNOWN', { stage: 6, retriable: false });
  });

  it('PLUGIN_ERROR on a crash: generic message to the agent, sanitized stack in the audit log', async () => {
    const r = await stack.ipc(family, 'tool.invoke.crash', {});
    expectError(r, 'PLUGIN_ERROR', { message: 'Internal plugin error', retriable: false });
    expect(r.err.stage).toBeUndefined();
    for (const leak of ['hunter2', '/srv/', FAULTY_TOKEN, 'postgres']) expect(r.stderr).not.toContain(leak);
    const audit = await stack.auditText();
    expect(audit).toContain('connect to postgres://admin:'); // the stack trace is there...
    expect(audit).not.toContain('hunter2secret'); // ...without the password
    expect(audit).not.toContain(FAULTY_TOKEN); // ...or the configured secret
  });

  it('a look-alike ToolError takes the crash path', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.fake_tool_error', {}), 'PLUGIN_ERROR', { message: 'Internal plugin error' });
  });

  it('HANDLER_ERROR carries the handler message, sanitized, with source = plugin', async () => {
    const r = await stack.ipc(family, 'tool.invoke.tool_error', {});
    expectError(r, 'HANDLER_ERROR', { retriable: true });
    expect(r.err.message).toContain('Upstream rejected');
    expect(r.err.message).not.toContain('abcdefghijklmnop1234567890');
    expect(r.err.stage).toBeUndefined();
  });

  it('reserved codes from a handler become HANDLER_ERROR; the audit keeps the original (two entries)', async () => {
    const r = await stack.ipc(family, 'tool.invoke.reserved_code', {});
    expectError(r, 'HANDLER_ERROR', { message: 'pretending to be the core' });
    const entries = await stack.auditEntries();
    const handler = entries.filter((e) => e.stage === 'handler' && e.topic === 'tool.invoke.reserved_code').at(-1);
    expect(handler?.code).toBe('PLUGIN_TIMEOUT');
    const response = entries.find((e) => e.stage === 'response' && e.correlation === handler?.correlation);
    expect(response?.code).toBe('HANDLER_ERROR');
    const trace = await stack.ipc(family, 'tool.invoke.get_diagnostics', { correlation: handler?.correlation });
    expect(trace.code).toBe(0);
    expect(trace.out.handler_error_code).toBe('PLUGIN_TIMEOUT');
    expect(trace.out.stages.map((s: { stage: string }) => s.stage)).toContain('handler');
  });

  it('a handler code that is not reserved passes through', async () => {
    const s = await stack.openSession('family');
    expectError(await stack.ipc(s, 'tool.invoke.custom_code', {}), 'NOT_FOUND', { message: 'No such reminder' });
    await stack.core.closeSession(s.id);
  });

  it('responses over 1 MB become HANDLER_ERROR', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.huge', {}), 'HANDLER_ERROR', { message: 'Response exceeded maximum size' });
  });

  it.each(['bigint', 'function', 'cycle', 'undefined', 'map'])('a non-JSON result (%s) is a crash', async (kind) => {
    expectError(await stack.ipc(family, 'tool.invoke.not_json', { kind }), 'PLUGIN_ERROR', { message: 'Internal plugin error' });
  });
});

describe('response sanitization', () => {
  it('strips configured secrets and credential patterns, and logs where', async () => {
    const r = await stack.ipc(family, 'tool.invoke.leak_secret', {});
    expect(r.code).toBe(0);
    for (const leak of [FAULTY_TOKEN, 'zyxwvutsrqponmlk9876543210', 'sk-ant-api03', 'MIIEowIBAAKCAQEA']) expect(r.stdout).not.toContain(leak);
    expect(r.out.note).toBe('the token is [REDACTED]');
    expect(r.out.nested.keys[0]).toBe('fine');
    const entries = await stack.auditEntries();
    const sanitized = entries.filter((e) => e.stage === 'sanitize' && e.topic === 'tool.invoke.leak_secret').at(-1);
    expect(sanitized?.outcome).toBe('sanitized');
    expect(sanitized?.fields).toEqual(expect.arrayContaining(['result.note', 'result.header', 'result.nested.keys[1]', 'result.pem']));
    expect(JSON.stringify(entries)).not.toContain(FAULTY_TOKEN);
  });
});

describe('intrinsic tools', () => {
  it('list_tools shows what this session may call, not failed plugins', async () => {
    const r = await stack.ipc(family, 'tool.invoke.list_tools', {});
    const names = r.out.tools.map((t: { name: string }) => t.name);
    expect(names).toEqual(expect.arrayContaining(['echo', 'crash', 'whoami', 'get_diagnostics', 'list_tools', 'get_session_info']));
    expect(names).not.toContain('netfail_tool');
    const kids = await stack.openSession('kids');
    const kidNames = (await stack.ipc(kids, 'tool.invoke.list_tools', {})).out.tools.map((t: { name: string }) => t.name).sort();
    expect(kidNames).toEqual(['echo', 'get_diagnostics', 'get_session_info', 'list_tools']);
    await stack.core.closeSession(kids.id);
  });

  it('get_session_info reports plugin health by category, never raw errors', async () => {
    const r = await stack.ipc(family, 'tool.invoke.get_session_info', {});
    expect(r.out.group).toBe('family');
    expect(r.out.session_start).toBe(family.startedAt);
    expect(r.out.plugins.healthy).toEqual(expect.arrayContaining(['echo', 'faulty', 'guarded', 'services']));
    expect(r.out.plugins.failed).toEqual(
      expect.arrayContaining([
        { name: 'netfail', category: 'NETWORK_ERROR' },
        { name: 'authfail', category: 'AUTH_ERROR' },
        { name: 'badconfig', category: 'CONFIG_ERROR' },
        { name: 'crashinit', category: 'INTERNAL_ERROR' },
        { name: 'broken', category: 'CONFIG_ERROR' },
      ]),
    );
    expect(r.stdout).not.toMatch(/ECONNREFUSED|sk-ant|Unauthorized|endpoint/);
  });

  it('intrinsics go through the pipeline like any tool', async () => {
    expectError(await stack.ipc(family, 'tool.invoke.get_diagnostics', { group: 'kids' }), 'VALIDATION_FAILED', { stage: 3, field: 'group' });
    expectError(await stack.ipc(family, 'tool.invoke.list_tools', { x: 1 }), 'VALIDATION_FAILED', { stage: 3 });
  });

  it('get_diagnostics recent errors covers only this session', async () => {
    const s = await stack.openSession('family');
    await stack.ipc(s, 'tool.invoke.nope', {});
    const r = await stack.ipc(s, 'tool.invoke.get_diagnostics', { last_n: 50 });
    expect(r.code).toBe(0);
    expect(r.out.entries.length).toBeGreaterThan(0);
    expect(r.out.entries.every((e: { topic: string }) => e.topic === 'tool.invoke.nope')).toBe(true);
    await stack.core.closeSession(s.id);
  });
});

describe('plugin initialization failures', () => {
  it('are CRITICAL audit entries with a category, and never leak the raw secret', async () => {
    const entries = await stack.auditEntries();
    const critical = entries.filter((e) => e.severity === 'CRITICAL');
    const byPlugin = Object.fromEntries(critical.map((e) => [e.source, e.code]));
    expect(byPlugin).toMatchObject({ netfail: 'NETWORK_ERROR', authfail: 'AUTH_ERROR', badconfig: 'CONFIG_ERROR', crashinit: 'INTERNAL_ERROR', broken: 'CONFIG_ERROR' });
    const broken = critical.find((e) => e.source === 'broken');
    expect(broken?.detail).toMatch(/colour/);
    expect(JSON.stringify(critical)).not.toContain('sk-ant-api03-leakedleakedleaked');
  });
});

describe('isolation', () => {
  it('a session cannot trace another session, and core services are group-scoped', async () => {
    const a = await stack.openSession('family');
    const b = await stack.openSession('other');
    expect((await stack.ipc(a, 'tool.invoke.echo', { text: 'secret-a' })).code).toBe(0);
    const aCorrelation = (await stack.auditEntries()).filter((e) => e.session === a.id && e.stage === 'response').at(-1)?.correlation;
    expect(aCorrelation).toBeTruthy();
    const traceFromB = await stack.ipc(b, 'tool.invoke.get_diagnostics', { correlation: aCorrelation });
    expect(traceFromB.out).toMatchObject({ found: false, stages: [] });
    const traceFromA = await stack.ipc(a, 'tool.invoke.get_diagnostics', { correlation: aCorrelation });
    expect(traceFromA.out.found).toBe(true);
    // The services plugin asks for the audit of A's correlation from group "other": nothing.
    const fromOther = await stack.ipc(b, 'tool.invoke.audit_trail', { correlation: aCorrelation });
    expect(fromOther.out.entries).toEqual([]);
    const fromFamily = await stack.ipc(a, 'tool.invoke.audit_trail', { correlation: aCorrelation });
    expect(fromFamily.out.entries.length).toBeGreaterThan(0);
    expect(fromFamily.out.entries.every((e: { group: string }) => e.group === 'family')).toBe(true);
    const who = await stack.ipc(b, 'tool.invoke.whoami', {});
    expect(who.out.group).toBe('other');
    await stack.core.closeSession(a.id);
    await stack.core.closeSession(b.id);
  });

  it('each session has its own socket directory; a closed session socket is gone', async () => {
    const a = await stack.openSession('family');
    const b = await stack.openSession('family');
    expect(a.socketPath).not.toBe(b.socketPath);
    expect(a.socketPath.split('/').slice(0, -1).join('/')).not.toBe(b.socketPath.split('/').slice(0, -1).join('/'));
    await stack.core.closeSession(a.id);
    const r = await stack.ipc(a, 'tool.invoke.echo', { text: 'x' }, { timeoutMs: 300 });
    expect(r.code).toBe(1);
    expect(r.err.code).toBe('IPC_TIMEOUT');
    await stack.core.closeSession(b.id);
  });
});
