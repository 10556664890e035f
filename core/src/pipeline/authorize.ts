// Stage 4a: may this group use this tool? The read-only intrinsics are always allowed; a
// core tool that acts (run_program) follows the group's allow-list; plugin tools follow it
// (default: every tool) and the plugin's group list.
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
    if (tool.owner === 'core' && !tool.acts) return true;
    const tools = this.policy(group).tools;
    const listed = tools.includes('*') || tools.includes(tool.name);
    return tool.owner === 'core' ? listed : listed && this.pluginMaySee(tool.owner, group);
  }
}
