// What a plugin may do besides answering its own tools, from its manifest and its own
// configuration, never from what it says about itself:
//
// - message.inbound: only a channel plugin (manifest `provides.channels` not empty), and
//   only for a group its own section of carapace.json maps: a value of its `chats`
//   (chat id → group, as telegram's and as pairing writes them), or a name in its
//   `groups` (the web chat, whose one "chat" is the logged-in owner at the console;
//   `"*"` is every group carapace.json names). Without `groups` in the section, the
//   default of `groups` in the plugin's own config_schema applies (the web chat's: `["*"]`).
// - task.*: only a plugin that declares `provides.schedules: true`.
// - Answering or listing confirmations (and so granting standing approvals): only a channel
//   plugin, and only for groups it maps, as for message.inbound.
//
// The group policy (`groups.<name>.plugins`) still applies on top of all of these.
import type { CoreConfig } from '../config.js';
import type { GroupAuthorizer } from '../pipeline/authorize.js';
import type { JsonObject } from '../protocol/envelope.js';
import type { ToolCatalog } from './catalog.js';

/** Why a power was refused (for the audit log and the plugin), or null: allowed. */
export type Refusal = string | null;

export class PluginPowers {
  constructor(
    private readonly catalog: ToolCatalog,
    /** The running configuration: pairing adds chats to it in place, and they count at once. */
    private readonly config: Pick<CoreConfig, 'groups' | 'plugins'>,
    private readonly authorizer: GroupAuthorizer,
  ) {}

  /** The groups a channel plugin's own configuration maps (none for any other plugin). */
  mappedGroups(plugin: string): Set<string> {
    const groups = new Set<string>();
    if (!this.catalog.isChannel(plugin)) return groups;
    const section: JsonObject = Object.hasOwn(this.config.plugins, plugin) ? this.config.plugins[plugin] : {};
    const chats = section.chats;
    if (typeof chats === 'object' && chats !== null && !Array.isArray(chats)) {
      for (const group of Object.values(chats)) if (typeof group === 'string') groups.add(group);
    }
    for (const name of this.groupsSetting(plugin, section)) {
      if (name === '*') for (const known of Object.keys(this.config.groups)) groups.add(known);
      else groups.add(name);
    }
    return groups;
  }

  /** May `plugin` publish `topic` for `group`? */
  mayPublish(plugin: string, topic: string, group: string): Refusal {
    if (topic === 'message.inbound') return this.channelFor(plugin, group, 'publish message.inbound');
    if (topic.startsWith('task.')) {
      if (this.catalog.discovered(plugin)?.manifest.provides.schedules !== true) return 'only a plugin that declares provides.schedules may publish task events';
      return this.authorizer.pluginMaySee(plugin, group) ? null : 'plugin may not act for this group';
    }
    return 'plugins may not publish this topic';
  }

  /** May `plugin` list or answer the confirmations of `group` (and so grant standing approvals)? */
  mayAnswerConfirmations(plugin: string, group: string): Refusal {
    return this.channelFor(plugin, group, 'answer or list confirmations');
  }

  private channelFor(plugin: string, group: string, what: string): Refusal {
    if (!this.catalog.isChannel(plugin)) return `only a channel plugin (provides.channels) may ${what}`;
    if (!this.mappedGroups(plugin).has(group)) return `group "${group}" is not one that plugin's configuration maps (chats or groups)`;
    return this.authorizer.pluginMaySee(plugin, group) ? null : 'plugin may not act for this group';
  }

  /** The section's `groups`, or its config_schema's default for `groups`. */
  private groupsSetting(plugin: string, section: JsonObject): string[] {
    const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
    if (section.groups !== undefined) return strings(section.groups);
    const schema = this.catalog.discovered(plugin)?.manifest.config_schema as { properties?: { groups?: { default?: unknown } } } | undefined;
    return strings(schema?.properties?.groups?.default);
  }
}
