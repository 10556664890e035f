// The admin token: what a person types into the console's login page and what the CLI
// sends as a bearer token. A new user never has to make one: without
// CARAPACE_ADMIN_TOKEN, one is generated on first start into the data directory
// (mode 0600) and kept across restarts; `make token` prints it. Never put in a URL.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { StartupError } from '../protocol/errors.js';

export const ADMIN_TOKEN_FILE = 'admin-token';
/** A person-chosen token shorter than this is refused: the console is a door to the agent. */
const MIN_LENGTH = 16;

export interface AdminToken {
  token: string;
  /** env: CARAPACE_ADMIN_TOKEN; file: made earlier; created: made now. */
  origin: 'env' | 'file' | 'created';
  file: string;
}

export function adminToken(dataDir: string, fromEnv: string | undefined): AdminToken {
  const file = join(dataDir, ADMIN_TOKEN_FILE);
  if (fromEnv) {
    if (fromEnv.length < MIN_LENGTH) {
      throw new StartupError('CONFIG_INVALID', `CARAPACE_ADMIN_TOKEN is too short (${fromEnv.length} characters, at least ${MIN_LENGTH}); or leave it empty in .env and one is made for you`);
    }
    return { token: fromEnv, origin: 'env', file };
  }
  const saved = readToken(file);
  if (saved) return { token: saved, origin: 'file', file };
  const token = randomBytes(32).toString('base64url');
  mkdirSync(dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${token}\n`, { mode: 0o600 });
  chmodSync(temp, 0o600); // whatever the umask
  renameSync(temp, file);
  return { token, origin: 'created', file };
}

/** The saved token, or null when there is none (or it is empty: then a new one is made). */
export function readToken(file: string): string | null {
  try {
    const text = readFileSync(file, 'utf8').trim();
    return text.length >= MIN_LENGTH ? text : null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StartupError('CONFIG_INVALID', `cannot read the admin token file ${file}: ${(err as Error).message}`);
  }
}
