// Every example call in every bundled plugin's skill passes that tool's arguments_schema,
// checked with the pipeline's own ajv setup: the agent copies these, and a call the core
// refuses (a placeholder against a pattern, an undeclared field) teaches it to fail.
import { describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { INTRINSIC_NAMES, intrinsicTools } from '../../src/intrinsics/intrinsics.js';
import { compileTool, discoverPlugins } from '../../src/plugins/discovery.js';
import { checkPluginSkills, checkSkillExamples, extractSkillExamples } from '../../src/plugins/skill-examples.js';
import { APP_VERSION } from '../../src/version.js';

// dist/core/test/unit → the repository root.
const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '../../../..');

describe('skill examples', () => {
  const discovery = discoverPlugins(join(ROOT, 'plugins'), APP_VERSION, INTRINSIC_NAMES);

  it('finds the bundled plugins', () => {
    expect(discovery.rejected).toEqual([]);
    expect(discovery.plugins.map((p) => p.name)).toEqual(expect.arrayContaining(['calendar', 'github-bugs', 'memory', 'reminders', 'tasks', 'telegram', 'webchat']));
  });

  it.each(['calendar', 'github-bugs', 'memory', 'reminders', 'tasks', 'telegram', 'webchat'])('every example in the %s skill passes its tool\'s schema', (name) => {
    const plugin = discovery.plugins.find((p) => p.name === name)!;
    const { examples, problems } = checkPluginSkills(plugin, intrinsicTools);
    expect(examples).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });

  it('reads shell quoting as the shell does', () => {
    const text = "x\nipc tool.invoke.t '{\"a\":\"today'\"'\"'s\"}'\n  `ipc tool.invoke.u '{}'` and ipc tool.invoke.v\n";
    expect(extractSkillExamples(text)).toEqual([
      { line: 2, tool: 't', argumentsText: '{"a":"today\'s"}' },
      { line: 3, tool: 'u', argumentsText: '{}' },
      { line: 3, tool: 'v', argumentsText: null },
    ]);
  });

  it('reports each kind of bad example with its line', () => {
    const tool = compileTool(
      {
        name: 'pick',
        description: 'd',
        risk_level: 'low',
        arguments_schema: { type: 'object', required: ['id'], additionalProperties: false, properties: { id: { type: 'string', pattern: '^[0-9a-f]{8}$' }, n: { type: 'integer', default: 1 } } },
      },
      'test',
    );
    const skill = [
      "ipc tool.invoke.pick '{\"id\":\"0badc0de\"}'",
      "ipc tool.invoke.pick '{\"id\":\"<id>\"}'",
      "ipc tool.invoke.pick '{\"id\":\"0badc0de\",\"extra\":1}'",
      "ipc tool.invoke.pick '{id: 1}'",
      "ipc tool.invoke.nope '{}'",
      'ipc tool.invoke.pick',
    ].join('\n');
    const problems = checkSkillExamples('skill/SKILL.md', skill, [tool]);
    expect(problems.map((p) => [p.line, p.code])).toEqual([
      [2, 'SCHEMA_MISMATCH'],
      [3, 'SCHEMA_MISMATCH'],
      [4, 'INVALID_JSON'],
      [5, 'UNKNOWN_TOOL'],
      [6, 'NO_ARGUMENTS'],
    ]);
    expect(problems[0].message).toContain('pattern');
  });
});
