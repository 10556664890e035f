// The parts of a new configuration that take effect live (config-diff.ts says which),
// written into the running configuration object in place: the authorizer, the plugin
// powers, pairing, the console and the agent manager all read it through that one object,
// so they see the new groups and sections at their next read. Sets and limits built from
// it at start are brought up to date here too.
import type { CoreConfig } from '../config.js';
import type { RateLimiter } from '../pipeline/rate-limit.js';

export interface LiveTargets {
  limiter: RateLimiter;
  allowHiddenCharacters: Set<string>;
  allowAfterExternal: Set<string>;
}

export function applyLive(running: CoreConfig, next: CoreConfig, targets: LiveTargets): void {
  running.groups = next.groups;
  running.default_group = next.default_group;
  running.plugins = next.plugins;
  running.rate_limit = next.rate_limit;
  running.tool_rate_limits = next.tool_rate_limits;
  running.confirmations.allow_hidden_characters = next.confirmations.allow_hidden_characters;
  running.confirmations.allow_after_external_content = next.confirmations.allow_after_external_content;
  targets.limiter.setLimits(next.rate_limit, next.tool_rate_limits);
  replaceAll(targets.allowHiddenCharacters, next.confirmations.allow_hidden_characters);
  replaceAll(targets.allowAfterExternal, next.confirmations.allow_after_external_content);
}

function replaceAll(set: Set<string>, values: string[]): void {
  set.clear();
  for (const value of values) set.add(value);
}
