// A small CLI for the admin API: list pending confirmations, approve or deny one.
//   node dist/core/src/admin/cli.js confirmations | approve <id> | deny <id>
import type { PendingConfirmation } from '../confirm/confirmations.js';

const base = process.env.CARAPACE_ADMIN_URL || `http://127.0.0.1:${process.env.CARAPACE_ADMIN_PORT || 8780}`;
const token = process.env.CARAPACE_ADMIN_TOKEN;

async function call(method: 'GET' | 'POST', path: string): Promise<unknown> {
  const response = await fetch(`${base}${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} });
  const body = (await response.json()) as unknown;
  if (!response.ok) throw new Error(JSON.stringify(body));
  return body;
}

async function main(argv: string[]): Promise<void> {
  const [command, id] = argv;
  if (command === 'confirmations') {
    const { pending } = (await call('GET', '/confirmations')) as { pending: PendingConfirmation[] };
    if (pending.length === 0) console.log('No pending confirmations.');
    for (const p of pending) console.log(`${p.id}  ${p.group}  ${p.tool}  ${JSON.stringify(p.arguments)}  (expires ${p.expires_at})`);
  } else if ((command === 'approve' || command === 'deny') && id) {
    console.log(JSON.stringify(await call('POST', `/confirmations/${encodeURIComponent(id)}/${command}`)));
  } else {
    console.error('usage: cli.js confirmations | approve <id> | deny <id>');
    process.exit(2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`carapace: ${(err as Error).message}`);
  process.exit(1);
});
