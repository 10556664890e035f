// What changed between the running configuration and a new one, in names only (groups,
// plugins, settings), never values: a plugin section holds secrets or their references.
// Which settings take effect live, and which only at the next start of the core:
//
// - live: `groups`, `default_group`, `plugins` (a plugin whose section changed is started
//   again, the others keep running), `rate_limit`, `tool_rate_limits`,
//   `confirmations.allow_hidden_characters` and `confirmations.allow_after_external_content`;
// - at the next start: everything else (`agents`, `llm`, `audit`, `sessions`,
//   `conversation`, the timeouts, the other `confirmations` settings). They size things
//   built once at start (the LLM proxy, session guards, stores, the plugin host's
//   deadlines); until then the running values stay in force everywhere, and the Checks
//   page says which settings wait.
import type { CoreConfig } from '../config.js';
import { canonicalJson } from '../plugins/plugin-settings.js';

export interface ConfigDiff {
  groupsAdded: string[];
  groupsRemoved: string[];
  /** Groups whose policy (tools, plugins) changed. */
  groupsChanged: string[];
  defaultGroupChanged: boolean;
  /** Plugins whose section changed (added, removed or edited): started again on the new one. */
  pluginsChanged: string[];
  rateLimitsChanged: boolean;
  confirmationListsChanged: boolean;
  /** Settings that differ but take effect only when the core starts again (dotted names). */
  waitForRestart: string[];
}

const LIVE_KEYS = new Set(['groups', 'default_group', 'plugins', 'rate_limit', 'tool_rate_limits', 'confirmations']);
const LIVE_CONFIRMATIONS = new Set(['allow_hidden_characters', 'allow_after_external_content']);

const same = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);

function keysChanged(a: Record<string, unknown>, b: Record<string, unknown>): { added: string[]; removed: string[]; changed: string[] } {
  const added = Object.keys(b).filter((k) => !Object.hasOwn(a, k));
  const removed = Object.keys(a).filter((k) => !Object.hasOwn(b, k));
  const changed = Object.keys(b).filter((k) => Object.hasOwn(a, k) && !same(a[k], b[k]));
  return { added, removed, changed };
}

export function diffConfig(running: CoreConfig, next: CoreConfig): ConfigDiff {
  const groups = keysChanged(running.groups, next.groups);
  const plugins = keysChanged(running.plugins, next.plugins);
  const waitForRestart: string[] = [];
  for (const key of Object.keys(next) as (keyof CoreConfig)[]) {
    if (!LIVE_KEYS.has(key) && !same(running[key], next[key])) waitForRestart.push(key);
  }
  const confirmations = running.confirmations as unknown as Record<string, unknown>;
  const nextConfirmations = next.confirmations as unknown as Record<string, unknown>;
  for (const key of Object.keys(nextConfirmations)) {
    if (!LIVE_CONFIRMATIONS.has(key) && !same(confirmations[key], nextConfirmations[key])) waitForRestart.push(`confirmations.${key}`);
  }
  return {
    groupsAdded: groups.added,
    groupsRemoved: groups.removed,
    groupsChanged: groups.changed,
    defaultGroupChanged: !same(running.default_group, next.default_group),
    pluginsChanged: [...plugins.added, ...plugins.removed, ...plugins.changed].sort(),
    rateLimitsChanged: !same(running.rate_limit, next.rate_limit) || !same(running.tool_rate_limits, next.tool_rate_limits),
    confirmationListsChanged: [...LIVE_CONFIRMATIONS].some((key) => !same(confirmations[key], nextConfirmations[key])),
    waitForRestart: waitForRestart.sort(),
  };
}

/** Nothing that takes effect live changed. */
export function nothingLive(diff: ConfigDiff): boolean {
  return diff.groupsAdded.length + diff.groupsRemoved.length + diff.groupsChanged.length + diff.pluginsChanged.length === 0 && !diff.defaultGroupChanged && !diff.rateLimitsChanged && !diff.confirmationListsChanged;
}

/** The change in words for the audit log and Activity: names, never values. */
export function describeDiff(diff: ConfigDiff): string {
  const parts: string[] = [];
  const list = (names: string[]): string => names.map((n) => `"${n}"`).join(', ');
  if (diff.groupsAdded.length > 0) parts.push(`groups added: ${list(diff.groupsAdded)}`);
  if (diff.groupsRemoved.length > 0) parts.push(`groups removed: ${list(diff.groupsRemoved)}`);
  if (diff.groupsChanged.length > 0) parts.push(`group policies changed: ${list(diff.groupsChanged)}`);
  if (diff.defaultGroupChanged) parts.push('default_group changed');
  if (diff.pluginsChanged.length > 0) parts.push(`plugin settings changed (started again): ${list(diff.pluginsChanged)}`);
  if (diff.rateLimitsChanged) parts.push('rate limits changed');
  if (diff.confirmationListsChanged) parts.push('confirmation allow-lists changed');
  if (diff.waitForRestart.length > 0) parts.push(`waiting for a restart of the core (docker compose restart): ${diff.waitForRestart.join(', ')}`);
  return parts.join('; ') || 'nothing that takes effect changed';
}
