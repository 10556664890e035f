// Writes a paired chat into carapace.json: re-read just before writing (the person may
// have edited it by hand meanwhile: their edit is kept, ours goes on top), checked whole
// against the schema, the previous file kept as carapace.json.bak, then replaced
// atomically (temp file, fsync, rename). A file that does not parse now is not touched.
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { writeAtomically } from '../state/atomic-write.js';
import { GROUP_NAME_PATTERN } from '../boundary/session-table.js';
import { parseConfig, type CoreConfig } from '../config.js';

export type ConfigChange = { ok: true; config: CoreConfig; backup: string | null } | { ok: false; code: 'CONFIG_INVALID' | 'NOT_FOUND' | 'CONFLICT' | 'INVALID_INPUT' | 'UNAVAILABLE'; message: string };

type Raw = Record<string, unknown> & { groups?: Record<string, unknown>; plugins?: Record<string, Record<string, unknown>> };

export function addChat(file: string, plugin: string, chat: string, group: string, create: boolean): ConfigChange {
  if (!GROUP_NAME_PATTERN.test(group)) return { ok: false, code: 'INVALID_INPUT', message: `"${group}" is not a group name (lower-case letters, digits, - and _)` };
  let raw: Raw;
  try {
    raw = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Raw) : {};
  } catch (err) {
    return { ok: false, code: 'CONFIG_INVALID', message: `${file} does not parse now (${(err as Error).message}): fix it, then approve again` };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, code: 'CONFIG_INVALID', message: `${file} is not a JSON object` };
  raw.groups ??= {};
  if (!Object.hasOwn(raw.groups, group)) {
    if (!create) return { ok: false, code: 'NOT_FOUND', message: `no group "${group}" (to make it, approve with create)` };
    raw.groups[group] = {};
  }
  raw.plugins ??= {};
  const section = (raw.plugins[plugin] ??= {});
  const chats = ((section.chats as Record<string, string> | undefined) ??= {});
  if (Object.hasOwn(chats, chat) && chats[chat] !== group) return { ok: false, code: 'CONFLICT', message: `chat ${chat} already belongs to group "${chats[chat]}"` };
  chats[chat] = group;
  let config: CoreConfig;
  try {
    config = parseConfig(raw, file);
  } catch (err) {
    return { ok: false, code: 'CONFIG_INVALID', message: (err as Error).message };
  }
  try {
    const backup = existsSync(file) ? `${file}.bak` : null;
    if (backup) copyFileSync(file, backup);
    writeAtomically(file, `${JSON.stringify(raw, null, 2)}\n`);
    return { ok: true, config, backup };
  } catch (err) {
    return { ok: false, code: 'UNAVAILABLE', message: `could not write ${file}: ${(err as Error).message}` };
  }
}
