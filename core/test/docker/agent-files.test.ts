// Files an agent sends a person through the web chat (send_webchat's `file`), from inside
// a real agent container as the agent (uid 1000, the real ipc binary): the core reads the
// file from that container only, checks it (inside /workspace/group, a regular file, at
// most 10 MB, PNG/JPEG/GIF/WebP/PDF or UTF-8 text by its bytes), keeps it, and the console
// serves it to a logged-in person as a download that no browser renders as a page.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FastifyInstance } from 'fastify';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { AgentManager } from '../../src/agents/agent-manager.js';
import type { DockerRuntime } from '../../src/agents/docker-runtime.js';
import { startAdminApi } from '../../src/admin/http-api.js';
import { FileStore } from '../../src/files/file-store.js';
import { SOCKETS } from '../../src/plugins/host-protocol.js';
import { ROOT, Stack, until } from '../harness.js';
import { newAgentManager, sh as shIn, testRuntime } from '../support/agents.js';
import { launchBrowser, logIn } from '../support/browser.js';
import { AnthropicStandIn } from '../support/anthropic-standin.js';

const TOKEN = 'agent-files-admin-token-0123456789';
// A 1x1 PNG.
const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
let stack: Stack;
let runtime: DockerRuntime;
let manager: AgentManager;
let standIn: AnthropicStandIn;
let container: string;
let admin: FastifyInstance;
let base: string;
let cookie: string;
let files: FileStore;

beforeAll(async () => {
  stack = await Stack.start({ plugins: [], extraPluginDirs: { webchat: join(ROOT, 'plugins/webchat') }, config: { groups: { family: {} } } });
  standIn = new AnthropicStandIn(() => [{ type: 'text', text: 'ok' }]);
  const upstream = await standIn.start();
  runtime = testRuntime();
  manager = newAgentManager(stack, { upstream, apiKey: 'sk-ant-test-0000', agents: { run_timeout_ms: 60_000 }, instance: `files-${process.pid}`, runtime });
  await manager.removeOrphans();
  await manager.enqueue('family', 'warm up').catch(() => undefined);
  container = manager.live('family')!.container;
  files = new FileStore(join(stack.dir, 'files'));
  stack.core.acceptFiles({ read: (c, p, max) => runtime.readFile(c, p, max), store: files });
  admin = await startAdminApi(stack.core, '127.0.0.1', 0, TOKEN, {
    console: { files, panels: () => stack.core.catalog.panels().map((p) => ({ ...p, socket: join(stack.runDir, SOCKETS.panels, `${p.name}.sock`) })) },
  });
  base = `http://127.0.0.1:${(admin.server.address() as AddressInfo).port}`;
  const login = await fetch(`${base}/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
  cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
}, 120_000);

afterAll(async () => {
  await admin?.close();
  await manager?.stop();
  await standIn?.stop();
  await stack?.stop();
});

const sh = (script: string) => shIn(runtime, container, script);

/** send_webchat with a file, as the agent, from inside its container. */
async function send(file: string): Promise<{ code: number | null; out: Record<string, unknown> | null; err: Record<string, unknown> | null }> {
  const r = await sh(`ipc tool.invoke.send_webchat '${JSON.stringify({ recipient: 'console', body: 'here it is', file })}'`);
  const parse = (text: string) => {
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      return null;
    }
  };
  return { code: r.code, out: parse(r.out), err: parse(r.err) };
}

const lastMessage = async () => {
  const res = await fetch(`${base}/plugins/webchat/api/history?group=family`, { headers: { cookie } });
  return ((await res.json()) as { messages: { id: string; text: string; file?: { id: string; name: string; size: number; type: string; inline: boolean } }[] }).messages.at(-1);
};

describe('a file the agent sends', () => {
  it('an image it made: kept by the core, the chat gets a reference, the console serves the same bytes inline', async () => {
    expect((await sh(`mkdir -p /workspace/group/charts && echo ${PNG_B64} | base64 -d > /workspace/group/charts/dot.png`)).code).toBe(0);
    const r = await send('charts/dot.png');
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({ delivered: true, file: { name: 'dot.png', type: 'image/png', size: 70 } });
    const message = (await lastMessage())!;
    expect(message.file).toMatchObject({ name: 'dot.png', type: 'image/png', inline: true });
    const got = await fetch(`${base}/api/files/${message.file!.id}`, { headers: { cookie } });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('image/png');
    expect(got.headers.get('content-disposition')).toBe('inline; filename="dot.png"');
    expect(got.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    expect(Buffer.from(await got.arrayBuffer()).equals(Buffer.from(PNG_B64, 'base64'))).toBe(true);
    // Only a logged-in person gets it.
    expect((await fetch(`${base}/api/files/${message.file!.id}`)).status).toBe(401);
  });

  it('an HTML page disguised as a report is plain text to download, never a page', async () => {
    await sh(`printf '<html><script>alert(document.cookie)</script></html>' > /workspace/group/report.html`);
    const r = await send('/workspace/group/report.html');
    expect(r.code).toBe(0);
    const message = (await lastMessage())!;
    const got = await fetch(`${base}/api/files/${message.file!.id}`, { headers: { cookie } });
    expect(got.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(got.headers.get('content-disposition')).toBe('attachment; filename="report.html"');
    expect(got.headers.get('x-content-type-options')).toBe('nosniff');
  });

  const refused: [string, string, string][] = [
    ['a file outside the workspace', '/etc/passwd', 'a file in /workspace/group'],
    ['a way out with ..', '../../etc/passwd', 'a file in /workspace/group'],
    ['the session socket', '/run/carapace/carapace.sock', 'a file in /workspace/group'],
    ['a symbolic link to a file outside', 'passwd-link', 'not a regular file'],
    ['a path through a link to a folder outside (the engine would have followed it)', 'etc-link/passwd', 'goes through a symbolic link'],
    ['a folder', 'charts', 'not a regular file'],
    // Not a regular file, or (gVisor keeps its fifos inside the sandbox) not there for the engine: refused either way, nothing hangs.
    ['a fifo', 'pipe', '/workspace/group/pipe: '],
    ['a file that is not there', 'nothing-here.png', 'no such file'],
    ['a program (not a kind a person can open)', 'tool', 'not a kind of file that can be sent'],
    ['a file over 10 MB', 'big.txt', 'larger than 10 MB'],
  ];
  it.each(refused)('refuses %s (%s) with a clear error, and sends nothing', async (_what, file, says) => {
    await sh('ln -sf /etc/passwd /workspace/group/passwd-link; ln -sfn /etc /workspace/group/etc-link; [ -p /workspace/group/pipe ] || mkfifo /workspace/group/pipe; cp /bin/ls /workspace/group/tool; [ -f /workspace/group/big.txt ] || head -c 11000000 /dev/zero | tr "\\0" a > /workspace/group/big.txt');
    const before = await lastMessage();
    const r = await send(file);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatchObject({ code: 'VALIDATION_FAILED', field: 'file' });
    expect(String(r.err?.message)).toContain(says);
    expect((await lastMessage())?.id).toBe(before?.id);
  });

  it('a folder swapped for a link to /etc between the look and the read never makes the core read a file the agent cannot (/etc/shadow)', async () => {
    // As the agent: `swap` is a folder holding `shadow`, a link to /etc, or absent, over and over, for 25 s.
    const swapper = `const fs = require('fs'); const d = '/workspace/group/swap';
      fs.rmSync(d, { recursive: true, force: true }); fs.mkdirSync(d + '-dir', { recursive: true }); fs.writeFileSync(d + '-dir/shadow', 'mine');
      try { fs.symlinkSync('/etc', d + '-link'); } catch {}
      for (const end = Date.now() + 25000; Date.now() < end;) for (const k of ['-dir', '-link']) try { fs.renameSync(d + k, d); fs.renameSync(d, d + k); } catch {}`;
    await sh(`echo ${Buffer.from(swapper).toString('base64')} | base64 -d > /workspace/group/swap.js && (node /workspace/group/swap.js > /dev/null 2>&1 &)`);
    const read = new Set<string>();
    let refused = 0;
    for (const end = Date.now() + 20_000; Date.now() < end;) {
      const r = await runtime.readFile(container, '/workspace/group/swap/shadow', 1_000_000);
      if (r.ok) read.add(r.bytes.toString('utf8').slice(0, 40));
      else refused++;
    }
    // What the race gave: the agent's own file, or a refusal (not there, a link, the engine losing its way); never root's.
    // (Refusals show the swapping ran; under load a CI run saw no read land on the folder at all.)
    expect([...read].filter((k) => k !== 'mine')).toEqual([]);
    expect(refused).toBeGreaterThan(0);
  }, 60_000);

  it('the agent cannot hand the plugin a reference of its own making', async () => {
    const r = await sh(`ipc tool.invoke.send_webchat '${JSON.stringify({ recipient: 'console', body: 'x', file: { id: '00000000-0000-4000-8000-000000000000', name: 'a', size: 1, type: 'text/html', inline: true } })}'`);
    expect(r.code).not.toBe(0);
    expect(JSON.parse(r.err)).toMatchObject({ code: 'VALIDATION_FAILED', field: 'file' });
  });
});

// propose_write's `from`: a file of the workspace saved into the person's documents folder.
describe('a file the agent proposes for the documents folder', () => {
  const documents = () => join(stack.dataDir, 'documents');
  const propose = (files: Record<string, unknown>[]) => sh(`ipc tool.invoke.propose_write '${JSON.stringify({ why: 'the chart you asked for', files })}'`);
  const other = Buffer.from(PNG_B64, 'base64');
  other[other.length - 13] ^= 0xff; // another picture, same size

  it('is taken before the person is asked: they see its kind, size and hash and the picture itself; the yes writes those bytes, whatever the agent did to its file meanwhile', async () => {
    expect((await sh(`mkdir -p /workspace/group/out && echo ${PNG_B64} | base64 -d > /workspace/group/out/chart.png`)).code).toBe(0);
    const call = propose([{ path: 'documents/charts/spending.png', from: 'out/chart.png' }]);
    const pending = await stack.pendingConfirmation('family', (p) => p.tool === 'propose_write');
    const [file] = pending.arguments.files as { path: string; taken: { id: string; type: string; size: number; sha256: string } }[];
    const sha = createHash('sha256').update(Buffer.from(PNG_B64, 'base64')).digest('hex');
    expect(file).toEqual({ path: 'documents/charts/spending.png', taken: { id: expect.any(String), type: 'image/png', size: 70, sha256: sha } });
    expect(pending.description.state).toEqual(['into your documents folder (1 file)', `charts/spending.png: new file, 70 bytes (image/png from the workspace, sha256 ${sha.slice(0, 12)})`]);
    // The picture the person looks at is the kept copy, on the Approvals page (Chromium).
    const shown = await fetch(`${base}/api/files/${file.taken.id}`, { headers: { cookie } });
    expect(Buffer.from(await shown.arrayBuffer()).equals(Buffer.from(PNG_B64, 'base64'))).toBe(true);
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/`);
      await logIn(page, TOKEN);
      await page.goto(`${base}/#/approvals`);
      const img = `.pending[data-id="${pending.id}"] .taken img`;
      await page.waitForFunction((sel) => (document.querySelector(sel) as HTMLImageElement | null)?.complete && (document.querySelector(sel) as HTMLImageElement).naturalWidth === 1, { timeout: 30_000 }, img);
      expect(await page.$eval(img, (e) => [e.getAttribute('src'), e.getAttribute('alt')])).toEqual([`/api/files/${file.taken.id}`, 'documents/charts/spending.png']);
      expect(await page.$eval(`.pending[data-id="${pending.id}"] .taken .muted`, (e) => e.textContent)).toBe('documents/charts/spending.png: image/png, 70 bytes, the very bytes that would be written');
    } finally {
      await browser.close();
    }
    // The agent swaps its file while the person looks: what they approved is still what is written.
    expect((await sh(`echo ${other.toString('base64')} | base64 -d > /workspace/group/out/chart.png`)).code).toBe(0);
    expect(existsSync(join(documents(), 'charts/spending.png'))).toBe(false);
    await stack.answerConfirmation('family', (p) => p.id === pending.id);
    const r = await call;
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ documents: true, written: [{ path: 'documents/charts/spending.png', bytes: 70 }] });
    expect(readFileSync(join(documents(), 'charts/spending.png')).equals(Buffer.from(PNG_B64, 'base64'))).toBe(true);
  }, 60_000);

  const refused: [string, Record<string, unknown>[], number, string][] = [
    ['a file outside the workspace', [{ path: 'documents/p.txt', from: '/etc/passwd' }], 5, 'a file in /workspace/group'],
    ['a symbolic link out of it', [{ path: 'documents/p.txt', from: 'passwd-link' }], 5, 'not a regular file'],
    ['a program', [{ path: 'documents/ls', from: 'tool' }], 5, 'not a kind of file that can be sent'],
    ['a file for a skill (its files are read as text)', [{ path: 'skills/charts/chart.png', from: 'out/chart.png' }], 3, 'a skill\'s files are proposed as text'],
    ['both content and from', [{ path: 'documents/a.txt', content: 'x', from: 'out/chart.png' }], 3, 'give its content, or'],
    ['a kept copy of its own making', [{ path: 'documents/a.png', taken: { id: '00000000-0000-4000-8000-000000000000', type: 'image/png', size: 1, sha256: '0'.repeat(64) } }], 3, 'taken'],
  ];
  it.each(refused)('refuses %s, with nobody asked', async (_what, files, stage, says) => {
    await sh('ln -sf /etc/passwd /workspace/group/passwd-link; cp /bin/ls /workspace/group/tool');
    const asked = stack.core.confirmations.list().length;
    const r = await propose(files);
    expect(r.code).not.toBe(0);
    expect(JSON.parse(r.err)).toMatchObject({ code: 'VALIDATION_FAILED', stage });
    expect(r.err).toContain(says);
    expect(stack.core.confirmations.list().length).toBe(asked);
  });

  /** The files the core keeps (the store's folder: each file and its description). */
  const kept = () => readdirSync(join(stack.dir, 'files')).length;
  /** The call's answer, and whether a person was asked (then they say no, so that it ends). */
  async function outcome(files: Record<string, unknown>[]): Promise<{ asked: boolean; code: number | null; err: string }> {
    const call = propose(files);
    const asked = await Promise.race([call.then(() => null), stack.pendingConfirmation('family', (p) => p.tool === 'propose_write').catch(() => null)]);
    if (asked) stack.core.confirmations.resolve(asked.id, false, 'test');
    const r = await call;
    return { asked: asked !== null, code: r.code, err: r.err };
  }

  it('refuses a path through a symbolic link to a folder outside the workspace (the engine would follow it: /etc/shadow, which the agent itself cannot read)', async () => {
    await sh('ln -sfn /etc /workspace/group/etc-link; ln -sfn / /workspace/group/root-link');
    expect((await sh('cat /workspace/group/etc-link/shadow')).code).not.toBe(0);
    for (const from of ['etc-link/shadow', 'root-link/etc/shadow', 'etc-link/passwd']) {
      const r = await outcome([{ path: 'documents/shadow.txt', from }]);
      expect(r.asked).toBe(false);
      expect(JSON.parse(r.err)).toMatchObject({ code: 'VALIDATION_FAILED', stage: 5, message: expect.stringContaining('goes through a symbolic link') });
    }
  });

  it('a proposal that writes nothing keeps nothing: refused half way, refused at the bound of waiting confirmations, or answered no', async () => {
    await sh(`mkdir -p /workspace/group/out && echo ${PNG_B64} | base64 -d > /workspace/group/out/chart.png; cp /bin/ls /workspace/group/tool`);
    const before = kept();
    // Three pictures, then a program: refused at the fourth, after three were read.
    const half = await outcome([1, 2, 3].map((n) => ({ path: `documents/c${n}.png`, from: 'out/chart.png' })).concat({ path: 'documents/ls', from: 'tool' }));
    expect(half).toMatchObject({ asked: false });
    expect(JSON.parse(half.err)).toMatchObject({ code: 'VALIDATION_FAILED', stage: 5 });
    expect(kept()).toBe(before);
    // Answered no.
    const no = await outcome([{ path: 'documents/no.png', from: 'out/chart.png' }]);
    expect(no).toMatchObject({ asked: true });
    expect(JSON.parse(no.err)).toMatchObject({ code: 'CONFIRMATION_DENIED' });
    expect(kept()).toBe(before);
    // The group's waiting confirmations at their bound (3): one more is refused, and keeps nothing either.
    const waiting = [1, 2, 3].map((n) => propose([{ path: `documents/w${n}.txt`, content: 'x' }]));
    await until(() => stack.core.confirmations.list('family').length === 3, 10_000);
    const over = await propose([{ path: 'documents/over.png', from: 'out/chart.png' }]);
    expect(JSON.parse(over.err)).toMatchObject({ code: 'CONFIRMATION_LIMIT' });
    expect(kept()).toBe(before);
    for (const p of stack.core.confirmations.list('family')) stack.core.confirmations.resolve(p.id, false, 'test');
    await Promise.all(waiting);
  }, 60_000);

  it('large files read one proposal after another leave the agent running (read as the agent with `head`, they stopped its Claude Code under gVisor)', async () => {
    // 9 MB that is a PNG by its bytes.
    await sh(`{ echo ${PNG_B64} | base64 -d; head -c 9000000 /dev/zero; } > /workspace/group/big.png`);
    const asking = (name: string) => stack.core.confirmations.list('family').find((p) => JSON.stringify(p.arguments).includes(`documents/${name}1.png`));
    for (const [name, n] of [['a', 1], ['b', 1], ['c', 3], ['d', 3]] as const) {
      const call = propose(Array.from({ length: n }, (_, i) => ({ path: `documents/${name}${i + 1}.png`, from: 'big.png' })));
      stack.core.confirmations.resolve((await until(() => asking(name), 20_000)).id, false, 'test');
      expect(JSON.parse((await call).err)).toMatchObject({ code: 'CONFIRMATION_DENIED' });
    }
    expect(await runtime.isRunning(container)).toBe(true);
  }, 90_000);

  it("a kept copy gone before the yes (its own group's files pushed it out of the bounded store; another group's cannot): WRITE_REFUSED, nothing written", async () => {
    await sh(`mkdir -p /workspace/group/out && echo ${PNG_B64} | base64 -d > /workspace/group/out/chart.png`);
    const call = propose([{ path: 'documents/evicted.png', from: 'out/chart.png' }]);
    const pending = await stack.pendingConfirmation('family', (p) => p.tool === 'propose_write');
    const copy = (JSON.parse(JSON.stringify(pending.arguments)) as { files: { taken: { id: string } }[] }).files[0].taken.id;
    const text = { type: 'text/plain; charset=utf-8', inline: false };
    // Another group's chat sends 500 files meanwhile (the store keeps 500): they push out their own.
    for (let i = 0; i < 500; i++) files.put('other', 'a.txt', Buffer.from('a'), text);
    expect(files.get(copy)?.group).toBe('family');
    // The group's own chat sends 500: now the copy goes.
    for (let i = 0; i < 500; i++) files.put('family', 'a.txt', Buffer.from('a'), text);
    expect(files.get(copy)).toBeNull();
    await stack.answerConfirmation('family', (p) => p.id === pending.id);
    const r = await call;
    expect(JSON.parse(r.err)).toMatchObject({ code: 'WRITE_REFUSED' });
    expect(r.err).toContain('kept copy');
    expect(existsSync(join(documents(), 'evicted.png'))).toBe(false);
  }, 60_000);
});
