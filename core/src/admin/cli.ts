// A small CLI for the admin API: pending confirmations and standing approvals, the
// admin token (for the console's login) and the container's health check.
//   node dist/core/src/admin/cli.js confirmations | approve <id> [hours to allow] | deny <id>
//                                   standing | allow <group> <tool> '<json arguments>' <hours> [uses per hour] | revoke <id>
//                                   pairing | pair <code> <group> [new] | refuse <code>
//                                   token | health | doctor
import { join } from 'node:path';
import type { PendingConfirmation } from '../confirm/confirmations.js';
import type { StandingApproval } from '../confirm/standing-approvals.js';
import type { PairingRequest } from '../pairing/pairing-requests.js';
import type { Report } from '../doctor/checks.js';
import { testConnections } from '../doctor/connection-lines.js';
import { ADMIN_TOKEN_FILE, readToken } from '../console/admin-token.js';
import { pathsFromEnv } from '../settings.js';
import { TOKEN_WAIT_S, waitForToken } from './token-wait.js';

const USAGE = "usage: cli.js confirmations | approve <id> [hours to allow] | deny <id> | standing | allow <group> <tool> '<json>' <hours> [uses per hour] | revoke <id> | pairing | pair <code> <group> [new] | refuse <code> | token | health | doctor";

const base = process.env.CARAPACE_ADMIN_URL || `http://127.0.0.1:${process.env.CARAPACE_ADMIN_PORT || 8780}`;
// The one from .env, else the one the core made on its first start.
const tokenFile = join(pathsFromEnv().dataDir, ADMIN_TOKEN_FILE);
const token = process.env.CARAPACE_ADMIN_TOKEN || readToken(tokenFile) || undefined;

async function call(method: 'GET' | 'POST' | 'DELETE', path: string, send?: unknown): Promise<unknown> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  if (send !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, { method, headers, body: send === undefined ? undefined : JSON.stringify(send) });
  const body = (await response.json()) as unknown;
  if (!response.ok) throw new Error(JSON.stringify(body));
  return body;
}

async function main(argv: string[]): Promise<void> {
  const [command, id, ...rest] = argv;
  if (command === 'confirmations') {
    const { pending } = (await call('GET', '/confirmations')) as { pending: PendingConfirmation[] };
    if (pending.length === 0) console.log('No pending confirmations.');
    // From the core's description: warnings first, every hidden character a visible escape.
    for (const p of pending) {
      console.log(`${p.id}  ${p.group}  ${p.tool}  (expires ${p.expires_at})`);
      for (const w of p.description.warnings) console.log(`  ⚠ ${w}`);
      for (const line of p.description.summary) console.log(`  ${line}`);
      if (p.description.state?.length) console.log(`  What it refers to:\n${p.description.state.map((l) => `    ${l}`).join('\n')}`);
      if (p.description.summary_cut) console.log(`  (the complete arguments: the console's Approvals page; hash ${p.description.hash.slice(0, 12)})`);
    }
  } else if ((command === 'approve' || command === 'deny') && id) {
    const body = command === 'approve' && rest[0] !== undefined ? { allow_hours: Number(rest[0]) } : undefined;
    console.log(JSON.stringify(await call('POST', `/confirmations/${encodeURIComponent(id)}/${command}`, body)));
  } else if (command === 'standing') {
    const { standing } = (await call('GET', '/standing-approvals')) as { standing: StandingApproval[] };
    if (standing.length === 0) console.log('No standing approvals.');
    for (const a of standing) console.log(`${a.id}  ${a.group}  ${a.tool}  ${JSON.stringify(a.arguments)}  (by ${a.created_by}, until ${a.expires_at}, ${a.uses_per_hour} an hour, used ${a.used_at.length} in the last hour)`);
  } else if (command === 'allow' && id && (rest.length === 3 || rest.length === 4)) {
    const [tool, json, hours, uses] = rest;
    console.log(JSON.stringify(await call('POST', '/standing-approvals', { group: id, tool, arguments: JSON.parse(json) as unknown, hours: Number(hours), ...(uses !== undefined ? { uses_per_hour: Number(uses) } : {}) })));
  } else if (command === 'pairing') {
    const { pending } = (await call('GET', '/pairing')) as { pending: PairingRequest[] };
    if (pending.length === 0) console.log('No chat is waiting to be paired.');
    for (const p of pending) console.log(`${p.code}  ${p.plugin} chat ${p.chat}${p.name ? ` (${p.name})` : ''}  "${p.text ?? ''}"  (expires ${p.expires_at})`);
  } else if (command === 'pair' && id && rest[0]) {
    console.log(JSON.stringify(await call('POST', `/pairing/${encodeURIComponent(id)}/approve`, { group: rest[0], create: rest[1] === 'new' })));
  } else if (command === 'refuse' && id) {
    console.log(JSON.stringify(await call('POST', `/pairing/${encodeURIComponent(id)}/deny`, {})));
  } else if (command === 'token') {
    // A core that is starting makes it within seconds: wait for it (bounded), then say there is none.
    const waitS = Number(process.env.CARAPACE_TOKEN_WAIT_S ?? TOKEN_WAIT_S);
    const found = token ?? (await waitForToken(() => readToken(tokenFile), (Number.isFinite(waitS) ? waitS : TOKEN_WAIT_S) * 1000));
    if (!found) throw new Error('no admin token yet: start the core once (docker compose up -d), then ask again');
    console.log(found);
  } else if (command === 'doctor') {
    let report: Report;
    try {
      report = (await call('GET', '/doctor')) as Report;
    } catch (err) {
      console.log(`✗ The core is not answering at ${base} (${(err as Error).message}).\n    Fix: start it with \`docker compose up -d\`; see \`docker compose logs core\` for why it stopped.`);
      process.exit(1);
    }
    for (const c of report.checks) console.log(`${{ ok: '✓', warn: '!', fail: '✗' }[c.status]} ${c.title}: ${c.detail}${c.fix && c.status !== 'ok' ? `\n    Fix: ${c.fix}` : ''}`);
    // The plugins' servers, logged in to now (each bounded to 15 s by the core).
    const connections = await testConnections(call).catch((err: unknown) => ({ ok: false, lines: [`✗ Connections: not tested (${(err as Error).message}).`] }));
    for (const line of connections.lines) console.log(line);
    const ok = report.ok && connections.ok;
    console.log(ok ? '\nEverything the appliance needs works.' : '\nSomething is broken: see the fixes above.');
    process.exitCode = ok ? 0 : 1;
  } else if (command === 'health') {
    // The container's health check: non-zero unless the core answers and its audit log is writable.
    await call('GET', '/health');
  } else if (command === 'revoke' && id) {
    console.log(JSON.stringify(await call('DELETE', `/standing-approvals/${encodeURIComponent(id)}`)));
  } else {
    console.error(USAGE);
    process.exit(2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`carapace: ${(err as Error).message}`);
  process.exit(1);
});
