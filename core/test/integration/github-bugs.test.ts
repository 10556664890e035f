// The bundled github-bugs plugin, end to end: the real core, the real plugin host process,
// the real ipc binary and a GitHub/Gitea REST stand-in on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import * as zmq from 'zeromq';
import { freePort, ROOT, Stack, type IpcResult } from '../harness.js';
import { expectError } from '../support/expect-ipc.js';
import { GitHubStandIn } from '../support/github-standin.js';
import type { AuditEntry } from '../../src/audit/audit-log.js';
import type { Session } from '../../src/boundary/session-table.js';

const TOKEN = 'ghp_Carapace0Test0Token0abcdefghijklmnop';
const REPO = 'acme/carapace';

interface StartOptions {
  token?: string;
  flavor?: 'github' | 'gitea';
  repository?: string;
  baseUrl?: string;
}

function startStack(gh: GitHubStandIn, opts: StartOptions = {}): Promise<Stack> {
  return Stack.start({
    plugins: ['faulty'],
    extraPluginDirs: { 'github-bugs': join(ROOT, 'plugins/github-bugs') },
    env: { GITHUB_TOKEN: opts.token ?? TOKEN },
    config: {
      groups: { main: {}, other: {} },
      confirmation_timeout_ms: 20_000,
      plugins: {
        faulty: { api_token: '${FAULTY_TOKEN}' },
        'github-bugs': { api_base_url: opts.baseUrl ?? gh.url, repository: opts.repository ?? REPO, token: '${GITHUB_TOKEN}', flavor: opts.flavor ?? 'github' },
      },
    },
  });
}

let gh: GitHubStandIn;
let stack: Stack;
let main: Session;
let other: Session;
/** Everything ipc printed in the main stack, to look for the token at the end. */
const printed: string[] = [];

async function call(s: Stack, session: Session, topic: string, args: unknown): Promise<IpcResult> {
  const r = await s.ipc(session, topic, args, { timeoutMs: 25_000 });
  printed.push(r.stdout, r.stderr);
  return r;
}

/** Files a report and answers its confirmation like the user would. */
async function report(s: Stack, session: Session, args: Record<string, unknown>, approve = true): Promise<IpcResult> {
  const pending = call(s, session, 'tool.invoke.create_bug_report', args);
  await s.answerConfirmation(session.group, (p) => p.tool === 'create_bug_report' && p.arguments.title === args.title, approve);
  return pending;
}

/** The correlation of the session's last call of a tool, and its audit entries. */
async function lastCall(s: Stack, session: Session, tool: string): Promise<{ correlation: string; entries: AuditEntry[] }> {
  const all = await s.auditEntries();
  const correlation = all.filter((e) => e.session === session.id && e.topic === `tool.invoke.${tool}` && e.stage === 'response').at(-1)?.correlation;
  expect(correlation).toBeTruthy();
  return { correlation: correlation!, entries: all.filter((e) => e.correlation === correlation) };
}

beforeAll(async () => {
  gh = await GitHubStandIn.start({ token: TOKEN, repositories: [REPO] });
  stack = await startStack(gh);
  main = await stack.openSession('main');
  other = await stack.openSession('other');
});

afterAll(async () => {
  await stack?.stop();
  await gh?.close();
});

describe('start-up', () => {
  it('verifies the token with GET /user and the repository, GitHub style', () => {
    expect(stack.core.catalog.state('github-bugs')).toBe('healthy');
    const user = gh.requests.find((r) => r.path === '/user');
    expect(user).toMatchObject({ method: 'GET', status: 200, authorization: `Bearer ${TOKEN}`, accept: 'application/vnd.github+json' });
    expect(gh.requests.find((r) => r.path === `/repos/${REPO}`)).toMatchObject({ method: 'GET', status: 200 });
  });
});

describe('create_bug_report', () => {
  it('waits for the user, then files the narrative with the host-side evidence of the correlation ids', async () => {
    const crash = await call(stack, main, 'tool.invoke.crash', {});
    expectError(crash, 'PLUGIN_ERROR');
    const { correlation, entries } = await lastCall(stack, main, 'crash');
    expect(entries.some((e) => e.stage === 'handler' && e.outcome === 'error')).toBe(true);

    const before = gh.issues.length;
    const pending = call(stack, main, 'tool.invoke.create_bug_report', {
      title: 'The crash tool fails every time',
      description: 'I called `crash` for the user and it failed.\n\nExpected: a result.',
      correlation_ids: [correlation],
      severity: 'high',
    });
    const confirmation = await stack.pendingConfirmation('main', (p) => p.tool === 'create_bug_report');
    expect(confirmation.arguments).toMatchObject({ title: 'The crash tool fails every time', severity: 'high' });
    expect(gh.issues.length).toBe(before);
    expect(gh.requests.some((r) => r.method === 'POST')).toBe(false);
    stack.core.confirmations.resolve(confirmation.id, true, 'test');
    const r = await pending;

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const issue = gh.issuesIn(REPO).at(-1)!;
    expect(r.out).toEqual({ url: issue.html_url, number: issue.number });
    expect(issue.flavor).toBe('github');
    expect(issue.title).toBe('The crash tool fails every time');
    expect(issue.body).toContain('I called `crash` for the user and it failed.\n\nExpected: a result.');
    expect(issue.body).toContain('**Severity:** high');
    expect(issue.body).toContain('### Host-side evidence');
    expect(issue.body).toContain(correlation);
    expect(issue.body).toContain('tool.invoke.crash');
    for (const e of entries) expect(issue.body).toContain(e.timestamp);
    const handlerLine = issue.body.split('\n').find((l) => l.includes(' handler ') && l.includes(' error '));
    expect(handlerLine).toBeDefined();
    // The audit's free-text detail (a stack trace, internals) is not copied to the tracker.
    expect(issue.body).not.toMatch(/postgres|hunter2|\/srv\/|at .*\.js:\d+/);
    const post = gh.requests.find((req) => req.method === 'POST')!;
    expect(post).toMatchObject({ path: `/repos/${REPO}/issues`, status: 201, authorization: `Bearer ${TOKEN}`, accept: 'application/vnd.github+json' });
  });

  it('includes evidence of the caller\'s group only: another group\'s correlation finds nothing', async () => {
    await call(stack, other, 'tool.invoke.crash', {});
    const theirs = await lastCall(stack, other, 'crash');
    await call(stack, main, 'tool.invoke.tool_error', {});
    const mine = await lastCall(stack, main, 'tool_error');

    const r = await report(stack, main, {
      title: 'Two failures',
      description: 'One of them is not ours.',
      correlation_ids: [theirs.correlation, mine.correlation],
      severity: 'low',
    });
    expect(r.code).toBe(0);
    const body = gh.issuesIn(REPO).find((i) => i.number === r.out.number)!.body;
    expect(body).toContain(`**\`${theirs.correlation}\`**: no audit entries in this group`);
    for (const e of theirs.entries) expect(body).not.toContain(e.timestamp);
    for (const e of mine.entries) expect(body).toContain(e.timestamp);
    expect(body).toContain('**Severity:** low');
  });

  it('a denial files nothing', async () => {
    const posts = gh.requests.filter((r) => r.method === 'POST').length;
    const r = await report(stack, main, { title: 'Do not file this', description: 'Denied.', severity: 'medium' }, false);
    expectError(r, 'CONFIRMATION_DENIED', { stage: 5 });
    expect(gh.requests.filter((q) => q.method === 'POST').length).toBe(posts);
    expect(gh.issues.some((i) => i.title === 'Do not file this')).toBe(false);
  });

  it('the same report twice is refused, not filed again, whoever approved it', async () => {
    const args = { title: 'Filed once only', description: 'The same words twice.', severity: 'low' };
    const first = await report(stack, main, args);
    expect(first.code).toBe(0);
    const filed = gh.issues.length;
    const second = await report(stack, main, args);
    expectError(second, 'DUPLICATE_REPORT');
    expect(second.err.message).toContain(`an identical report was already filed at`);
    expect(second.err.message).toContain(first.out.url);
    expect(gh.issues.length).toBe(filed);
  });

  it('evidence the agent can change: the prompt shows it, and a standing approval given for other evidence asks a person again', async () => {
    // Issue 21: a granted report, then a failing call under the same correlation id whose
    // error text holds a "secret": the same arguments would carry it to a public tracker.
    // The agent names a correlation id of its choosing, with no entries yet, in the granted report.
    const correlation = 'planted-4f1c';
    const args = { title: 'Crash evidence', description: 'See the evidence.', correlation_ids: [correlation], severity: 'low' };
    const granted = await stack.core.grantStandingDescribed({ group: 'main', tool: 'create_bug_report', arguments: args, hours: 1, uses_per_hour: 5, by: 'test' });
    expect('id' in granted && granted.state?.[0]).toBe(`Evidence for ${correlation}: no audit entries in this group.`);

    const dealer = new zmq.Dealer({ linger: 0, receiveTimeout: 5000 });
    dealer.connect(`ipc://${main.socketPath}`);
    await dealer.send(['', JSON.stringify({ topic: 'tool.invoke.leak_SECRET_hunter2_token', correlation, arguments: {} })]);
    await dealer.receive();
    dealer.close();

    const posts = gh.requests.filter((r) => r.method === 'POST').length;
    const pending = call(stack, main, 'tool.invoke.create_bug_report', args);
    const prompt = await stack.pendingConfirmation('main', (p) => p.tool === 'create_bug_report' && p.arguments.title === 'Crash evidence');
    expect(prompt.description.state?.join('\n')).toContain('leak_SECRET_hunter2_token');
    expect(gh.requests.filter((r) => r.method === 'POST').length).toBe(posts);
    stack.core.confirmations.resolve(prompt.id, false, 'test');
    expectError(await pending, 'CONFIRMATION_DENIED', { stage: 5 });
    expect(gh.issues.some((i) => i.title === 'Crash evidence')).toBe(false);
  });

  it('scrubs credential-looking strings from the narrative', async () => {
    const leaked = 'ghp_SomeOtherToken0123456789abcdefghijkl';
    const r = await report(stack, main, {
      title: 'Credentials in the narrative',
      description: `The error said Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123 and ${leaked}.`,
      severity: 'medium',
    });
    expect(r.code).toBe(0);
    const body = gh.issuesIn(REPO).find((i) => i.number === r.out.number)!.body;
    expect(body).not.toContain('abcdefghijklmnopqrstuvwxyz0123');
    expect(body).not.toContain(leaked);
    expect(body).toContain('[redacted]');
    expect(body).not.toContain('### Host-side evidence');
  });

  it('rejects more than 20 correlation ids or a bad severity before asking anyone', async () => {
    const many = Array.from({ length: 21 }, (_, i) => `c-${i}`);
    expectError(await call(stack, main, 'tool.invoke.create_bug_report', { title: 'Too many', description: 'x', severity: 'low', correlation_ids: many }), 'VALIDATION_FAILED', { stage: 3 });
    expectError(await call(stack, main, 'tool.invoke.create_bug_report', { title: 'Bad severity', description: 'x', severity: 'urgent' }), 'VALIDATION_FAILED', { field: 'severity' });
    expect(stack.core.confirmations.list('main')).toHaveLength(0);
  });
});

describe('tracker failures reach the agent as actionable errors without internals', () => {
  const noInternals = (r: IpcResult): void => {
    expect(r.err.message).not.toMatch(/https?:|127\.0\.0\.1|\/repos\/|Bearer|ghp_/);
    expect(r.stderr).not.toContain(TOKEN);
  };

  it('5xx: retriable, try again later', async () => {
    gh.failNextIssue(502, { message: 'Server Error' });
    const r = await report(stack, main, { title: 'During an outage', description: 'x', severity: 'low' });
    expectError(r, 'TRACKER_UNAVAILABLE', { retriable: true });
    expect(r.err.message).toMatch(/try again later/);
    noInternals(r);
  });

  it('an exhausted rate limit names the wait', async () => {
    const reset = Math.floor(Date.now() / 1000) + 30;
    gh.failNextIssue(403, { message: 'API rate limit exceeded for user ID 4242.' }, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) });
    const r = await report(stack, main, { title: 'Rate limited', description: 'x', severity: 'low' });
    expectError(r, 'TRACKER_RATE_LIMITED', { retriable: true });
    expect(r.err.message).toMatch(/try again in \d+ s/);
    noInternals(r);
  });

  it('a revoked token, a renamed or a vanished repository: the operator must act', async () => {
    gh.rotateToken('ghp_TheNewToken00000000000000000000000000');
    try {
      const r = await report(stack, main, { title: 'Token revoked', description: 'x', severity: 'low' });
      expectError(r, 'TRACKER_AUTH', { retriable: false });
      expect(r.err.message).toMatch(/operator/);
      noInternals(r);
    } finally {
      gh.rotateToken(TOKEN);
    }
    gh.moveRepository(REPO, 'acme/carapace-ng');
    try {
      const r = await report(stack, main, { title: 'Repository renamed', description: 'x', severity: 'low' });
      expectError(r, 'TRACKER_NOT_FOUND', { retriable: false });
      expect(r.err.message).toMatch(/moved or been renamed/);
      noInternals(r);
      // The redirect was not followed: the token went nowhere else.
      expect(gh.requests.some((q) => q.path.startsWith('/repositories/'))).toBe(false);
    } finally {
      gh.moveRepository('acme/carapace-ng', REPO);
    }
    gh.removeRepository(REPO);
    try {
      const r = await report(stack, main, { title: 'Repository gone', description: 'x', severity: 'low' });
      expectError(r, 'TRACKER_NOT_FOUND', { retriable: false });
      noInternals(r);
    } finally {
      gh.addRepository(REPO);
    }
  });
});

describe('the token', () => {
  it('never appears in ipc output, the audit log, the host\'s logs or what reached the tracker (but the header)', async () => {
    const audit = await stack.auditText();
    expect(audit.length).toBeGreaterThan(0);
    expect(audit).not.toContain(TOKEN);
    for (const text of printed) expect(text).not.toContain(TOKEN);
    expect(stack.hostOutput).not.toContain(TOKEN);
    for (const issue of gh.issues) expect(`${issue.title}\n${issue.body}`).not.toContain(TOKEN);
    for (const request of gh.requests) expect(request.raw).not.toContain(TOKEN);
  });
});

describe('Gitea / Forgejo', () => {
  it('uses /api/v1 and "Authorization: token"', async () => {
    const mark = gh.requests.length;
    const gitea = await startStack(gh, { flavor: 'gitea' });
    try {
      expect(gitea.core.catalog.state('github-bugs')).toBe('healthy');
      const session = await gitea.openSession('main');
      const r = await report(gitea, session, { title: 'Filed on Forgejo', description: 'Narrative.', severity: 'critical' });
      expect(r.code).toBe(0);
      const issue = gh.issues.find((i) => i.title === 'Filed on Forgejo')!;
      expect(issue.flavor).toBe('gitea');
      expect(r.out).toEqual({ url: issue.html_url, number: issue.number });
      const seen = gh.requests.slice(mark);
      expect(seen.find((q) => q.path === '/api/v1/user')).toMatchObject({ method: 'GET', status: 200, authorization: `token ${TOKEN}` });
      expect(seen.find((q) => q.method === 'POST')).toMatchObject({ path: `/api/v1/repos/${REPO}/issues`, status: 201, authorization: `token ${TOKEN}`, accept: 'application/json' });
    } finally {
      await gitea.stop();
    }
  });
});

describe('start-up failures', () => {
  it('a wrong token: AUTH_ERROR in get_session_info, the tool is gone, the token appears nowhere', async () => {
    const wrong = 'ghp_WrongToken0000000000000000000000000000';
    const bad = await startStack(gh, { token: wrong });
    try {
      const session = await bad.openSession('main');
      const info = await bad.ipc(session, 'tool.invoke.get_session_info', {});
      expect(info.out.plugins.failed).toContainEqual({ name: 'github-bugs', category: 'AUTH_ERROR' });
      const r = await bad.ipc(session, 'tool.invoke.create_bug_report', { title: 'x y z', description: 'x', severity: 'low' });
      expect(r.code).toBe(1);
      expect(`${info.stdout}${info.stderr}${r.stdout}${r.stderr}${await bad.auditText()}${bad.hostOutput}`).not.toContain(wrong);
    } finally {
      await bad.stop();
    }
  });

  it('an unknown repository: CONFIG_ERROR', async () => {
    const bad = await startStack(gh, { repository: 'acme/nope' });
    try {
      expect(bad.core.catalog.health().failed).toContainEqual({ name: 'github-bugs', category: 'CONFIG_ERROR' });
    } finally {
      await bad.stop();
    }
  });

  it('an unreachable tracker: NETWORK_ERROR', async () => {
    const bad = await startStack(gh, { baseUrl: `http://127.0.0.1:${await freePort()}` });
    try {
      expect(bad.core.catalog.health().failed).toContainEqual({ name: 'github-bugs', category: 'NETWORK_ERROR' });
    } finally {
      await bad.stop();
    }
  });
});
