// Stage 4a: may this group use this tool? Intrinsics are always allowed; plugin tools
// follow the group's allow-list (default: every tool) and the plugin's group list.
import type { CoreConfig, GroupPolicy } from '../config.js';
import type { ToolEntry } from '../plugins/discovery.js';

export class GroupAuthorizer {
  constructor(private readonly config: Pick<CoreConfig, 'groups' | 'default_group'>) {}

  private policy(group: string): GroupPolicy {
    // hasOwn: a group named "constructor" must not find Object.prototype's.
    return Object.hasOwn(this.config.groups, group) ? this.config.groups[group] : this.config.default_group;
  }

  pluginMaySee(plugin: string, group: string): boolean {
    const allowed = this.policy(group).plugins;
    return allowed.includes('*') || allowed.includes(plugin);
  }

  mayUse(group: string, tool: ToolEntry): boolean {
    if (tool.owner === 'core') return true;
    const tools = this.policy(group).tools;
    return (tools.includes('*') || tools.includes(tool.name)) && this.pluginMaySee(tool.owner, group);
  }
}
