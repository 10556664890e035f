// Whose verdict counts on a mail's sender: the receiving server's topmost
// Authentication-Results, also when the server numbers its id and splits its verdict over
// several headers (Fastmail's shape), and never a header the sender wrote beside it.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { resolvePluginConfig } from '../../plugin-host/plugin-config.js';
import { verifySender } from '../../../plugins/email/auth-results.js';

/** Header lines as mailparser gives them (topmost first). */
const lines = (...headers: string[]) => headers.map((line) => ({ key: line.slice(0, line.indexOf(':')).toLowerCase(), line }));
const FASTMAIL = { authservId: 'mx*.messagingengine.com', split: true };

/** The run of headers a numbered server stamps: the verdict on the sender in the fourth. */
const fastmailRun = (id: string, verdict: string) => [
  `Authentication-Results: ${id};\r\n    x-csa=none;\r\n    x-me-sender=none`,
  `Authentication-Results: ${id};\r\n    bimi=none (no BIMI record)`,
  `Authentication-Results: ${id};\r\n    arc=none (no signatures found)`,
  `Authentication-Results: ${id};\r\n    ${verdict}`,
];
const ALICE_PASSES = 'dkim=pass (2048-bit key) header.d=example.org header.s=s1;\r\n    dmarc=pass (p=reject) header.from=example.org;\r\n    iprev=pass smtp.remote-ip=192.0.2.7;\r\n    spf=pass smtp.mailfrom=alice@example.org';
const MALLORY = 'dkim=none (no signatures found);\r\n    dmarc=none header.from=example.org;\r\n    spf=pass smtp.mailfrom=mallory@evil.test';

describe('the receiving server\'s verdict on a sender', () => {
  it('one header with everything (Gmail\'s shape): DMARC pass for the From domain counts; a pass for another domain does not', () => {
    const gmail = { authservId: 'mx.google.com', split: false };
    const mail = lines('Received: from x by mx.google.com', 'Authentication-Results: mx.google.com;\r\n dkim=pass header.i=@example.org; spf=pass smtp.mailfrom=example.org; dmarc=pass (p=NONE) header.from=example.org', 'From: alice@example.org');
    expect(verifySender(mail, gmail, 'alice@example.org')).toMatchObject({ authenticated: true });
    const other = lines('Authentication-Results: mx.google.com; spf=pass smtp.mailfrom=evil.test; dmarc=none header.from=example.org');
    expect(verifySender(other, gmail, 'alice@example.org').authenticated).toBe(false);
  });

  it('a numbered server with its verdict split over a run (Fastmail\'s shape): read together, it counts', () => {
    const mail = lines(...fastmailRun('mx3.messagingengine.com', ALICE_PASSES), 'Received: from out.example.org by mx3.messagingengine.com', 'From: <alice@example.org>');
    expect(verifySender(mail, FASTMAIL, 'alice@example.org')).toMatchObject({ authenticated: true });
    // Read as one header, the topmost says nothing of the sender: refused, not guessed.
    expect(verifySender(mail, { ...FASTMAIL, split: false }, 'alice@example.org')).toEqual({ authenticated: false, reason: 'no pass for the From domain' });
  });

  it('a sender\'s header added just below the server\'s run, same id, claiming a pass: the method said twice counts as not authenticated', () => {
    const forged = 'Authentication-Results: mx3.messagingengine.com; dmarc=pass header.from=example.org';
    const mail = lines(...fastmailRun('mx3.messagingengine.com', MALLORY), forged, 'Received: from evil.test by mx3.messagingengine.com');
    expect(verifySender(mail, FASTMAIL, 'alice@example.org')).toEqual({ authenticated: false, reason: 'a method\'s result appears in two headers from mx3.messagingengine.com' });
    // Without the forged header the same mail is plainly not Alice's.
    expect(verifySender(lines(...fastmailRun('mx3.messagingengine.com', MALLORY)), FASTMAIL, 'alice@example.org').authenticated).toBe(false);
  });

  it('the run is one server\'s: a header under another number ends it, and lower ones never count', () => {
    const mail = lines(...fastmailRun('mx3.messagingengine.com', MALLORY).slice(0, 3), 'Authentication-Results: mx9.messagingengine.com; dmarc=pass header.from=example.org');
    expect(verifySender(mail, FASTMAIL, 'alice@example.org').authenticated).toBe(false);
    const below = lines(...fastmailRun('mx3.messagingengine.com', MALLORY), 'X-Mailer: evil', 'Authentication-Results: mx3.messagingengine.com; dmarc=pass header.from=example.org');
    expect(verifySender(below, FASTMAIL, 'alice@example.org').authenticated).toBe(false);
  });

  it('the * stands for one label\'s letters and digits, nothing more', () => {
    for (const id of ['mx3.messagingengine.com.evil.test', 'mx3.evil.messagingengine.com', 'evil.test', 'mx.messagingengine.com', 'mx3xmessagingengine.com']) {
      const mail = lines(`Authentication-Results: ${id}; dmarc=pass header.from=example.org`);
      expect({ id, ...verifySender(mail, FASTMAIL, 'alice@example.org') }).toEqual({ id, authenticated: false, reason: 'no Authentication-Results from mx*.messagingengine.com' });
    }
  });

  it('the settings take a * only in the first label of an id of three labels or more', () => {
    const schema = JSON.parse(readFileSync(new URL('../../../../plugins/email/manifest.json', import.meta.url), 'utf8')).config_schema;
    const server = { host: 'imap.example.org', user: 'a', password: 'b' };
    const accepts = (id: string) => resolvePluginConfig({ imap: server, smtp: server, address: 'a@example.org', authserv_id: id }, schema, {}).ok;
    expect(['mx.google.com', 'mx*.messagingengine.com', '*.mail.example.org', 'mx.example.test'].map(accepts)).toEqual([true, true, true, true]);
    expect(['*', '*.com', 'mx*.example', 'mx.*.example.org', 'mx**.example.org', 'mx*.example.org*'].map(accepts)).toEqual([false, false, false, false, false, false]);
  });
});
