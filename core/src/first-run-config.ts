// First start with nothing but .env: without carapace.json the core writes a default one
// (group "main"; the web chat; Telegram set up but off until TELEGRAM_BOT_TOKEN is in
// .env; pairing closed: no chat is answered until the owner connects it), atomically.
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeAtomically } from './state/atomic-write.js';

export const DEFAULT_CONFIG = {
  groups: { main: {} },
  plugins: {
    telegram: { bot_token: '${TELEGRAM_BOT_TOKEN}', chats: {}, owners: [] },
  },
};

/** True when it wrote the default (there was no file). */
export function writeDefaultConfig(file: string): boolean {
  if (existsSync(file)) return false;
  mkdirSync(dirname(file), { recursive: true });
  writeAtomically(file, `${JSON.stringify(DEFAULT_CONFIG, null, 2)}\n`);
  return true;
}
