// The receiving server's verdict on a sender, as the plugin reads it now: a second opinion
// that may refuse a mail the plugin's own DKIM check passed, never admit one; read from the
// topmost Authentication-Results under the configured id (a numbered id and a verdict split
// over a run, Fastmail's shape, included), quoted strings and comments honoured.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { resolvePluginConfig } from '../../plugin-host/plugin-config.js';
import { parseAuthResults, serverObjection } from '../../../plugins/email/auth-results.js';

/** Header lines as mailparser gives them (topmost first). */
const lines = (...headers: string[]) => headers.map((line) => ({ key: line.slice(0, line.indexOf(':')).toLowerCase(), line }));
const FASTMAIL = { authservId: 'mx*.messagingengine.com', split: true };
const GMAIL = { authservId: 'mx.google.com', split: false };

/** The run of headers a numbered server stamps: the verdict on the sender in the fourth. */
const fastmailRun = (id: string, verdict: string) => [
  `Authentication-Results: ${id};\r\n    x-csa=none;\r\n    x-me-sender=none`,
  `Authentication-Results: ${id};\r\n    bimi=none (no BIMI record)`,
  `Authentication-Results: ${id};\r\n    arc=none (no signatures found)`,
  `Authentication-Results: ${id};\r\n    ${verdict}`,
];
const ALICE_PASSES = 'dkim=pass (2048-bit key) header.d=example.org header.s=s1;\r\n    dmarc=pass (p=reject) header.from=example.org;\r\n    iprev=pass smtp.remote-ip=192.0.2.7;\r\n    spf=pass smtp.mailfrom=alice@example.org';

describe('the receiving server\'s second opinion', () => {
  it('a pass, or nothing said against the signature relied on, raises no objection', () => {
    const mail = lines('Authentication-Results: mx.google.com;\r\n dkim=pass header.i=@example.org; spf=pass smtp.mailfrom=example.org; dmarc=pass (p=NONE) header.from=example.org', 'From: alice@example.org');
    expect(serverObjection(mail, GMAIL, 'alice@example.org', ['example.org'])).toBeNull();
    expect(serverObjection(lines(...fastmailRun('mx3.messagingengine.com', ALICE_PASSES)), FASTMAIL, 'alice@example.org', ['example.org'])).toBeNull();
  });

  it('dmarc=fail for the From domain, or dkim=fail for the domain relied on, refuses; no header of the server refuses', () => {
    expect(serverObjection(lines('Authentication-Results: mx.google.com; dmarc=fail header.from=example.org'), GMAIL, 'alice@example.org', ['example.org'])).toBe('mx.google.com says dmarc=fail');
    expect(serverObjection(lines('Authentication-Results: mx.google.com; dkim=fail header.d=example.org'), GMAIL, 'alice@example.org', ['example.org'])).toBe('mx.google.com says dkim=fail for example.org');
    expect(serverObjection(lines('Authentication-Results: mx.google.com; dkim=fail header.d=list.test; dkim=pass header.d=example.org'), GMAIL, 'alice@example.org', ['example.org'])).toBeNull();
    expect(serverObjection(lines('Authentication-Results: evil.test; dmarc=pass header.from=example.org'), GMAIL, 'alice@example.org', ['example.org'])).toBe('no Authentication-Results from mx.google.com');
  });

  it('the * stands for one label\'s letters and digits, nothing more', () => {
    for (const id of ['mx3.messagingengine.com.evil.test', 'mx3.evil.messagingengine.com', 'evil.test', 'mx.messagingengine.com', 'mx3xmessagingengine.com']) {
      expect(serverObjection(lines(`Authentication-Results: ${id}; dmarc=pass header.from=example.org`), FASTMAIL, 'alice@example.org', ['example.org'])).toBe('no Authentication-Results from mx*.messagingengine.com');
    }
  });

  it('a quoted string holding "; dmarc=pass ..." (a quoted local part the server copied in) stays one value', () => {
    const value = 'mx.example.test; spf=pass smtp.mailfrom="x\\"; dmarc=pass header.from=example.org; y=\\""@evil.test';
    const parsed = parseAuthResults(value);
    expect(parsed.results.map((r) => r.method)).toEqual(['spf']);
  });

  it('the settings take a * only in the first label of an id of three labels or more', () => {
    const schema = JSON.parse(readFileSync(new URL('../../../../plugins/email/manifest.json', import.meta.url), 'utf8')).config_schema;
    const server = { host: 'imap.example.org', user: 'a', password: 'b' };
    const accepts = (id: string) => resolvePluginConfig({ imap: server, smtp: server, address: 'a@example.org', authserv_id: id }, schema, {}).ok;
    expect(['mx.google.com', 'mx*.messagingengine.com', '*.mail.example.org', 'mx.example.test'].map(accepts)).toEqual([true, true, true, true]);
    expect(['*', '*.com', 'mx*.example', 'mx.*.example.org', 'mx**.example.org', 'mx*.example.org*'].map(accepts)).toEqual([false, false, false, false, false, false]);
  });
});
