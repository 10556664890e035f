// Real mail servers for tests, from Debian, on 127.0.0.1 with free ports and folders of the
// test's own: Dovecot (`apt-get install dovecot-imapd dovecot-lmtpd`) serves IMAP and takes
// deliveries over LMTP; Postfix (`apt-get install postfix`) takes SMTP, with logins checked
// by Dovecot (SASL), and delivers every mail for example.test to Dovecot. Postfix stamps
// each mail with the receiving server's Authentication-Results (authserv-id
// mx.example.test): an SPF pass for the envelope sender's domain, as a real MX would for
// mail from that domain's servers (loopback has no DNS to check); a test may give another
// stamp (`stamp`: a Postfix regexp table on the envelope sender). Whatever Authentication-
// Results a sender writes itself stays below that header. DNS is a DNS-over-HTTPS stand-in
// (dns-standin.ts): a test publishes a domain's DKIM key there and signs its mail with it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { ImapFlow } from 'imapflow';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { freePort, sleep } from '../harness.js';
import { DnsStandIn, type DkimKey } from './dns-standin.js';

export const AUTHSERV_ID = 'mx.example.test';
export const DOMAIN = 'example.test';
/** The receiving server's stamp: an SPF pass for the envelope sender's domain. */
export const SPF_STAMP = `/@([^@]+)$/ PREPEND Authentication-Results: ${AUTHSERV_ID}; spf=pass smtp.mailfrom=$1`;

export interface MailUser {
  address: string;
  password: string;
}

/** Resolves once `port` answers with a greeting line starting `expect`. */
async function greets(port: number, expect: string, timeoutMs: number, alive: () => boolean, output: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!alive()) throw new Error(`mail server exited: ${output()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.setTimeout(1000, () => (socket.destroy(), resolve(false)));
      socket.once('error', () => resolve(false));
      socket.once('data', (d) => (socket.destroy(), resolve(d.toString().startsWith(expect))));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`no greeting on port ${port}: ${output()}`);
    await sleep(100);
  }
}

function uidOf(name: string): number {
  const r = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`no user ${name}: are Dovecot and Postfix installed?`);
  return Number(r.stdout.trim());
}

export class MailServers {
  readonly dir = mkdtempSync(join(tmpdir(), 'cp-mail-'));
  imapPort = 0;
  smtpPort = 0;
  private lmtpPort = 0;
  private dovecotOutput = '';
  private dovecot: ChildProcess | null = null;
  private postfix: ChildProcess | null = null;
  /** The DNS the plugin looks DKIM keys and DMARC policies up in. */
  dns!: DnsStandIn;

  private constructor(
    readonly users: MailUser[],
    private readonly stamp: string,
  ) {}

  static async start(users: MailUser[], options: { stamp?: string } = {}): Promise<MailServers> {
    for (const bin of ['/usr/sbin/dovecot', '/usr/sbin/postfix']) {
      if (!existsSync(bin)) throw new Error(`${bin} is missing: apt-get install -y dovecot-imapd dovecot-lmtpd postfix`);
    }
    if (userInfo().uid !== 0) throw new Error('the mail servers need root (Postfix and Dovecot drop to their own users)');
    const servers = new MailServers(users, options.stamp ?? SPF_STAMP);
    try {
      servers.dns = await DnsStandIn.start();
      await servers.launch();
      return servers;
    } catch (err) {
      await servers.stop();
      throw err;
    }
  }

  private async launch(): Promise<void> {
    const d = this.dir;
    chmodSync(d, 0o755); // Dovecot delivers as nobody, Postfix runs as postfix
    [this.imapPort, this.smtpPort, this.lmtpPort] = [await freePort(), await freePort(), await freePort()];
    for (const sub of ['dovecot', 'dovecot/run', 'dovecot/state', 'mail', 'postfix', 'spool', 'pfdata']) mkdirSync(join(d, sub), { recursive: true });
    chownSync(join(d, 'mail'), uidOf('nobody'), Number(spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).stdout.trim()));
    chownSync(join(d, 'pfdata'), uidOf('postfix'), 0);
    writeFileSync(join(d, 'dovecot/users'), this.users.map((u) => `${u.address}:{PLAIN}${u.password}`).join('\n') + '\n', { mode: 0o644 });
    writeFileSync(join(d, 'dovecot/dovecot.conf'), [
      `base_dir = ${d}/dovecot/run`,
      `state_dir = ${d}/dovecot/state`,
      'log_path = /dev/stderr',
      'protocols = imap lmtp',
      'listen = 127.0.0.1',
      'ssl = no',
      'disable_plaintext_auth = no',
      'auth_mechanisms = plain login',
      `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%Lu ${d}/dovecot/users\n}`,
      `userdb {\n  driver = static\n  args = uid=nobody gid=nogroup home=${d}/mail/%Lu allow_all_users=yes\n}`,
      'mail_location = maildir:~/Maildir',
      'namespace inbox {\n  inbox = yes\n  separator = /\n  mailbox Archive {\n    auto = create\n  }\n  mailbox Other {\n    auto = create\n  }\n}',
      `service imap-login {\n  inet_listener imap {\n    address = 127.0.0.1\n    port = ${this.imapPort}\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}`,
      `service lmtp {\n  inet_listener lmtp {\n    address = 127.0.0.1\n    port = ${this.lmtpPort}\n  }\n}`,
      `service auth {\n  unix_listener auth-postfix {\n    mode = 0666\n  }\n}`,
      'service stats {\n  unix_listener stats-writer {\n    mode = 0666\n  }\n}',
      '',
    ].join('\n'));
    this.dovecot = spawn('/usr/sbin/dovecot', ['-F', '-c', join(d, 'dovecot/dovecot.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.capture(this.dovecot);
    await greets(this.imapPort, '* OK', 15_000, () => this.dovecot?.exitCode === null, () => this.output);

    // A master.cf of our own: nothing chrooted, SMTP only on the test's port.
    writeFileSync(join(d, 'postfix/master.cf'), [
      `127.0.0.1:${this.smtpPort} inet n - n - - smtpd`,
      ...['pickup unix n - n 60 1 pickup', 'cleanup unix n - n - 0 cleanup', 'qmgr unix n - n 300 1 qmgr', 'rewrite unix - - n - - trivial-rewrite',
        'bounce unix - - n - 0 bounce', 'defer unix - - n - 0 bounce', 'trace unix - - n - 0 bounce', 'verify unix - - n - 1 verify', 'flush unix n - n 1000? 0 flush',
        'proxymap unix - - n - - proxymap', 'smtp unix - - n - - smtp', 'relay unix - - n - - smtp', 'showq unix n - n - - showq', 'error unix - - n - - error',
        'retry unix - - n - - error', 'discard unix - - n - - discard', 'lmtp unix - - n - - lmtp', 'anvil unix - - n - 1 anvil', 'scache unix - - n - 1 scache',
        'postlog unix-dgram n - n - 1 postlogd'],
      '',
    ].join('\n'));
    writeFileSync(join(d, 'postfix/main.cf'), [
      'compatibility_level = 3.6',
      `queue_directory = ${d}/spool`,
      `data_directory = ${d}/pfdata`,
      'mail_owner = postfix',
      `myhostname = ${AUTHSERV_ID}`,
      `mydomain = ${DOMAIN}`,
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mydestination =',
      'mynetworks = 127.0.0.0/8',
      `virtual_mailbox_domains = ${DOMAIN}`,
      `virtual_transport = lmtp:inet:127.0.0.1:${this.lmtpPort}`,
      'smtpd_sasl_auth_enable = yes',
      'smtpd_sasl_type = dovecot',
      `smtpd_sasl_path = ${d}/dovecot/run/auth-postfix`,
      'smtpd_sasl_security_options = noanonymous',
      'smtpd_recipient_restrictions = permit_mynetworks, reject_unauth_destination',
      // The receiving server's verdict, on top of every mail (one per mail: the first match).
      `smtpd_sender_restrictions = check_sender_access regexp:${d}/postfix/stamp`,
      // A file: Node's pipes are sockets, which /dev/stdout cannot be opened on.
      `maillog_file = ${d}/postfix.log`,
      `maillog_file_prefixes = ${d}`,
      'alias_maps =',
      'alias_database =',
      'local_recipient_maps =',
      'smtputf8_enable = no',
      'biff = no',
      'queue_run_delay = 1s',
      '',
    ].join('\n'));
    writeFileSync(join(d, 'postfix/stamp'), `${this.stamp}\n`);
    this.postfix = spawn('/usr/sbin/postfix', ['-c', join(d, 'postfix'), 'start-fg'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.postfix.once('exit', (code) => (this.dovecotOutput += `\npostfix exited: ${code}\n`));
    this.capture(this.postfix);
    await greets(this.smtpPort, '220', 20_000, () => this.postfix?.exitCode === null, () => this.output);
  }

  /** What the servers logged (Dovecot's output, Postfix's log file), for failure messages. */
  get output(): string {
    let postfix = '';
    try {
      postfix = readFileSync(join(this.dir, 'postfix.log'), 'utf8').slice(-32_000);
    } catch {
      // not written yet
    }
    return `${this.dovecotOutput}\n${postfix}`;
  }

  private capture(child: ChildProcess): void {
    const keep = (b: Buffer): void => {
      this.dovecotOutput = (this.dovecotOutput + b.toString()).slice(-64_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  /**
   * A mail as the outside world sends it to `to`: through the real SMTP server, as mail from
   * `envelopeFrom`; with `sign`, DKIM-signed by that key first (as its domain's server would).
   */
  async deliver(to: string, opts: { envelopeFrom: string; from?: string; subject: string; text?: string; html?: string; headers?: Record<string, string>; sign?: DkimKey }): Promise<void> {
    const composed = await new MailComposer({
      from: opts.from ?? opts.envelopeFrom,
      to,
      subject: opts.subject,
      ...(opts.text !== undefined ? { text: opts.text } : {}),
      ...(opts.html !== undefined ? { html: opts.html } : {}),
      headers: opts.headers ?? {},
    }).compile().build();
    const raw = opts.sign ? await opts.sign.sign(composed) : composed.toString('utf8');
    const refused = await this.deliverRaw(to, opts.envelopeFrom, raw);
    if (refused) throw new Error(refused);
  }

  /** One raw mail (CRLF lines) through the real SMTP server; Postfix's refusal is returned, not thrown. */
  async deliverRaw(to: string, envelopeFrom: string, raw: string | Buffer): Promise<string | null> {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: this.smtpPort, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ envelope: { from: envelopeFrom, to: [to] }, raw });
      return null;
    } catch (err) {
      return (err as Error).message;
    } finally {
      transport.close();
    }
  }

  /** The email plugin's settings for `user`'s mailbox here (its password from `${EMAIL_PASSWORD}`, the servers' authserv-id, the DNS stand-in). */
  pluginSettings(user: MailUser): { imap: Record<string, unknown>; smtp: Record<string, unknown>; address: string; authserv_id: string; dns_resolver_url: string } {
    const server = (port: number) => ({ host: '127.0.0.1', port, secure: false, user: user.address, password: '${EMAIL_PASSWORD}' });
    return { imap: server(this.imapPort), smtp: server(this.smtpPort), address: user.address, authserv_id: AUTHSERV_ID, dns_resolver_url: this.dns.url };
  }

  /** The mails in `user`'s INBOX, as their own IMAP login sees them (quoted-printable soft breaks joined in `source`). */
  async inbox(user: MailUser): Promise<Array<{ uid: number; subject: string; from: string; source: string }>> {
    const client = new ImapFlow({ host: '127.0.0.1', port: this.imapPort, secure: false, auth: { user: user.address, pass: user.password }, logger: false });
    await client.connect();
    try {
      const lock = await client.getMailboxLock('INBOX');
      try {
        const out: Array<{ uid: number; subject: string; from: string; source: string }> = [];
        if (client.mailbox && client.mailbox.exists === 0) return out;
        for await (const m of client.fetch('1:*', { uid: true, envelope: true, source: true })) {
          out.push({ uid: m.uid, subject: m.envelope?.subject ?? '', from: m.envelope?.from?.[0]?.address ?? '', source: m.source?.toString().replace(/=\r?\n/g, '') ?? '' });
        }
        return out;
      } finally {
        lock.release();
      }
    } finally {
      await client.logout();
    }
  }

  async stop(): Promise<void> {
    await this.dns?.close();
    if (this.postfix && this.postfix.exitCode === null) {
      const exited = new Promise((r) => this.postfix!.once('exit', r));
      spawnSync('/usr/sbin/postfix', ['-c', join(this.dir, 'postfix'), 'stop'], { stdio: 'ignore' });
      const timer = setTimeout(() => this.postfix?.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    if (this.dovecot && this.dovecot.exitCode === null) {
      const exited = new Promise((r) => this.dovecot!.once('exit', r));
      this.dovecot.kill('SIGTERM');
      const timer = setTimeout(() => this.dovecot?.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
