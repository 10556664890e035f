// A send that failed (issue 32 §4): the SMTP connection breaks while the mail is handed over.
// The person used to read "a reply may have been refused, e.g. by a rate limit"; now the
// notice says what failed (the tool, its code and message), and the email page lists the
// failed send (to whom, when, the error). The real core, plugin host and email plugin; a
// mail from Alice through Postfix into Dovecot (DKIM-signed, as her provider would) starts
// the turn; the plugin's SMTP server is a stand-in on 127.0.0.1 that greets, takes the
// login and the envelope, and drops the connection after DATA. A second server drops it
// before DATA: nothing was sent, and the plugin says so (it used to say "could not be
// reached" for both, and nodemailer's own error is the same for both).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { startAdminApi } from '../../src/admin/http-api.js';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { ROOT, Stack, until } from '../harness.js';
import type { DkimKey } from '../support/dns-standin.js';
import { launchBrowser, logIn } from '../support/browser.js';
import { MailServers } from '../support/mail-servers.js';
import { agentIpc, scriptedManager, scriptedRuntime } from '../support/scripted-runtime.js';

const TOKEN = 'send-failed-admin-token-0123456';
const AGENT = { address: 'agent@example.test', password: 'Ag3nt-failed-s3cret-2Hj' };
const ALICE = { address: 'alice@example.test', password: 'alice-pw' };

let mail: MailServers;
let signer: DkimKey;
let stack: Stack;
let manager: AgentManager;
let admin: FastifyInstance;
let base: string;
/** SMTP stand-ins: one drops the connection after DATA, one at MAIL FROM. */
const smtp: Record<'afterData' | 'beforeData', { server: Server; port: number; dataSeen: number }> = {} as never;
const notices: string[] = [];
const answers = new Map<string, string>();

/** An SMTP server that greets, takes any login, and drops the connection at `breakAt`. */
async function breakingSmtp(breakAt: 'data' | 'mail'): Promise<{ server: Server; port: number; dataSeen: number }> {
  const state = { server: null as unknown as Server, port: 0, dataSeen: 0 };
  state.server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.write('220 standin.example.test ESMTP\r\n');
    let buffer = '';
    let inData = false;
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (inData) {
          if (line === '.') return void socket.destroy(); // the mail whole, and no answer to it
          continue;
        }
        const verb = line.split(' ', 1)[0].toUpperCase();
        if (verb === 'EHLO') socket.write('250-standin.example.test\r\n250 AUTH PLAIN LOGIN\r\n');
        else if (verb === 'AUTH') socket.write('235 2.7.0 Authentication successful\r\n');
        else if (verb === 'MAIL' && breakAt === 'mail') return void socket.destroy();
        else if (verb === 'DATA') {
          state.dataSeen++;
          inData = true;
          socket.write('354 End data with <CR><LF>.<CR><LF>\r\n');
        } else if (verb === 'QUIT') socket.end('221 Bye\r\n');
        else socket.write('250 OK\r\n');
      }
    });
  });
  await new Promise<void>((r) => state.server.listen(0, '127.0.0.1', () => r()));
  state.port = (state.server.address() as AddressInfo).port;
  return state;
}

function emailSettings(smtpPort: number): Record<string, unknown> {
  return {
    ...mail.pluginSettings(AGENT),
    smtp: { host: '127.0.0.1', port: smtpPort, secure: false, user: AGENT.address, password: '${EMAIL_PASSWORD}' },
    chats: { [ALICE.address]: 'main' },
    mailboxes: { main: { folders: ['INBOX'], recipients: [ALICE.address] } },
    poll_interval_s: 5,
  };
}

/** A mail from Alice whose turn sends her an answer with send_email (approved: a turn a mail started asks first); resolves with what the agent got. */
async function turnThatSends(subject: string): Promise<string> {
  const runs = () => stack.core.audit.query({ group: 'main' }).filter((e) => e.reason === 'agent run completed').length;
  const before = runs();
  await mail.deliver(AGENT.address, { envelopeFrom: ALICE.address, subject, text: `Please answer: ${subject}`, sign: signer });
  await stack.answerConfirmation('main', (p) => p.tool === 'send_email' && String(p.arguments.subject).includes(subject), true);
  await until(() => answers.has(subject) && runs() > before, 60_000);
  return answers.get(subject)!;
}

beforeAll(async () => {
  mail = await MailServers.start([AGENT, ALICE]);
  signer = mail.dns.dkimKey('example.test');
  smtp.afterData = await breakingSmtp('data');
  smtp.beforeData = await breakingSmtp('mail');
  stack = await Stack.start({
    plugins: [],
    extraPluginDirs: { email: join(ROOT, 'plugins/email') },
    env: { EMAIL_PASSWORD: AGENT.password },
    config: { groups: { main: {} }, confirmation_timeout_ms: 30_000, plugins: { email: emailSettings(smtp.afterData.port) } },
  });
  if (stack.core.catalog.state('email') !== 'healthy') throw new Error(`email plugin not healthy:\n${stack.hostOutput}\n${mail.output}`);
  const publish = stack.core.publish.bind(stack.core);
  stack.core.publish = (topic, group, payload, ...rest) => {
    if (topic === 'user.notify' && typeof payload.text === 'string') notices.push(payload.text);
    return publish(topic, group, payload, ...rest);
  };
  manager = scriptedManager(stack, scriptedRuntime(async (prompt, socket) => {
    const subject = /subject: "([^"]+)"/.exec(prompt)?.[1];
    if (!subject) return;
    answers.set(subject, await agentIpc(socket, 'tool.invoke.send_email', { to: [ALICE.address], subject: `Re: ${subject}`, body: 'Here is the answer.' }));
  }), 'send-failed', { groups: ['main'] });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, { console: { panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })) } });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
}, 90_000);

afterAll(async () => {
  await admin?.close();
  await manager?.stop();
  await stack?.stop();
  for (const s of Object.values(smtp)) s?.server.close();
  await mail?.stop();
});

/** The email page's data for the group, through the console (its login, the panel proxy). */
async function emailPage(): Promise<{ failed: Array<Record<string, unknown>>; sent: unknown[] }> {
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }), redirect: 'manual' });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const res = await fetch(`${base}/plugins/email/api/recent?group=main`, { headers: { cookie } });
  expect(res.status).toBe(200);
  return (await res.json()) as { failed: Array<Record<string, unknown>>; sent: unknown[] };
}

describe('a send whose SMTP connection broke', () => {
  it('after DATA: the agent gets RESULT_UNKNOWN, the person reads what failed (not "refused, e.g. by a rate limit"), the email page lists it', async () => {
    const answer = await turnThatSends('Dinner plans');
    expect(smtp.afterData.dataSeen).toBe(1);
    expect(answer).toContain('RESULT_UNKNOWN');
    const notice = await until(() => notices.find((n) => n.includes('Please answer: Dinner plans')), 10_000);
    expect(notice).toBe('The agent ended its turn on "Please answer: Dinner plans" without an answer reaching you: its send_email failed: RESULT_UNKNOWN: the connection to the SMTP server broke while the mail was being handed over: it may or may not have gone out. Do not send it again unless the person asks. It may have gone out all the same: check before you ask again.');
    expect(notice).not.toContain('e.g. by a rate limit');
    expect(stack.core.audit.query({ group: 'main' }).find((e) => /^agent turn ended without a reply reaching the person; user told/.test(e.reason ?? ''))?.reason).toContain('(the last reply tried: send_email, RESULT_UNKNOWN)');
    const page = await emailPage();
    expect(page.sent).toEqual([]);
    expect(page.failed).toEqual([{ tool: 'send_email', to: [ALICE.address], cc: [], bcc: [], subject: 'Re: Dinner plans', at: expect.any(String), code: 'RESULT_UNKNOWN', message: expect.stringContaining('may or may not have gone out') }]);
    expect(Date.now() - Date.parse(String(page.failed[0].at))).toBeLessThan(120_000);
  }, 120_000);

  it('before DATA: nothing was sent, and the notice and the page say so', async () => {
    const since = new Date().toISOString();
    await stack.writeConfig({ groups: { main: {} }, confirmation_timeout_ms: 30_000, plugins: { email: emailSettings(smtp.beforeData.port) } });
    await until(() => stack.core.audit.query({ since }).find((e) => e.source === 'email' && e.reason === 'initialized'), 30_000);
    const answer = await turnThatSends('Lunch plans');
    expect(answer).toContain('CONNECTION_LOST');
    const notice = await until(() => notices.find((n) => n.includes('Please answer: Lunch plans')), 10_000);
    expect(notice).toContain('its send_email failed: CONNECTION_LOST: the connection to the SMTP server broke before the mail was handed over; nothing was sent. Send it again if you still need it.');
    expect((await emailPage()).failed[0]).toMatchObject({ subject: 'Re: Lunch plans', code: 'CONNECTION_LOST' });
    expect(smtp.beforeData.dataSeen).toBe(0);
  }, 120_000);

  it('the email page in a browser lists both failed sends: to whom, when, the error', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/`);
      await logIn(page, TOKEN);
      await page.goto(`${base}/plugins/email/`);
      await page.waitForSelector('#failed tbody tr', { timeout: 30_000 });
      const rows = await page.$$eval('#failed tbody tr', (trs) => trs.map((r) => ({ to: r.querySelector('.recipients')!.textContent, subject: r.querySelector('.subject')!.textContent, error: r.querySelector('.error-text')!.textContent, tried: r.children[0].textContent })));
      expect(rows).toEqual([
        { to: ALICE.address, subject: 'Re: Lunch plans', error: expect.stringMatching(/^CONNECTION_LOST the connection to the SMTP server broke before the mail was handed over; nothing was sent$/), tried: expect.stringMatching(/\d/) },
        { to: ALICE.address, subject: 'Re: Dinner plans', error: expect.stringMatching(/^RESULT_UNKNOWN the connection to the SMTP server broke while the mail was being handed over/), tried: expect.stringMatching(/\d/) },
      ]);
      await page.screenshot({ path: join(ROOT, 'dist', 'screenshots', 'email-panel-failed.png') as `${string}.png`, fullPage: true });
    } finally {
      await browser.close();
    }
  }, 60_000);
});
