// The examples a plugin's skill shows the agent (`ipc tool.invoke.<tool> '<json>'`) checked
// against that tool's arguments_schema, with the same ajv setup the pipeline uses: an
// example the core would refuse teaches the agent a call that fails. Used by the unit test
// over the bundled plugins, and meant for a `make check-plugin` on any plugin folder.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DiscoveredPlugin, ToolEntry } from './discovery.js';
import { describeFailure } from './schema-compiler.js';

export interface SkillExample {
  /** 1-based line in the skill file. */
  line: number;
  tool: string;
  /** The argument word after shell quoting is undone; null when there is none. */
  argumentsText: string | null;
}

export interface SkillExampleProblem {
  file: string;
  line: number;
  tool: string;
  code: 'NO_ARGUMENTS' | 'INVALID_JSON' | 'UNKNOWN_TOOL' | 'SCHEMA_MISMATCH';
  message: string;
}

const INVOCATION = /\bipc\s+tool\.invoke\.([A-Za-z0-9_]+)/g;

/**
 * One shell word starting at `text[i]` (after blanks): '…' literal, "…" with \\ \" \$ \`
 * escapes, bare characters; adjacent parts join (`'today'"'"'s'`). Null when none or unclosed.
 */
function shellWord(text: string, start: number): string | null {
  let i = start;
  while (text[i] === ' ' || text[i] === '\t') i++;
  let word = '';
  let any = false;
  while (i < text.length && text[i] !== ' ' && text[i] !== '\t' && text[i] !== '\n' && text[i] !== '`') {
    const c = text[i];
    if (c === "'") {
      const close = text.indexOf("'", i + 1);
      if (close < 0) return null;
      word += text.slice(i + 1, close);
      i = close + 1;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === '\\' && '\\"$`'.includes(text[j + 1] ?? '')) j++;
        word += text[j];
      }
      if (j >= text.length) return null;
      i = j + 1;
    } else {
      word += c;
      i++;
    }
    any = true;
  }
  return any ? word : null;
}

/** Every `ipc tool.invoke.<tool> '<json>'` in a skill's text. */
export function extractSkillExamples(markdown: string): SkillExample[] {
  const examples: SkillExample[] = [];
  markdown.split('\n').forEach((text, index) => {
    for (const match of text.matchAll(INVOCATION)) {
      examples.push({ line: index + 1, tool: match[1], argumentsText: shellWord(text, (match.index ?? 0) + match[0].length) });
    }
  });
  return examples;
}

/** The problems of one skill file's examples against `tools` (by name). */
export function checkSkillExamples(file: string, markdown: string, tools: readonly ToolEntry[]): SkillExampleProblem[] {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const problems: SkillExampleProblem[] = [];
  for (const example of extractSkillExamples(markdown)) {
    const at = { file, line: example.line, tool: example.tool };
    const tool = byName.get(example.tool);
    if (!tool) {
      problems.push({ ...at, code: 'UNKNOWN_TOOL', message: `no tool "${example.tool}" in this plugin's manifest (or the core's)` });
      continue;
    }
    if (example.argumentsText === null) {
      problems.push({ ...at, code: 'NO_ARGUMENTS', message: "the example has no quoted arguments ('{...}')" });
      continue;
    }
    let args: unknown;
    try {
      args = JSON.parse(example.argumentsText);
    } catch (err) {
      problems.push({ ...at, code: 'INVALID_JSON', message: `the arguments are not JSON: ${(err as Error).message}` });
      continue;
    }
    // A copy: the pipeline's ajv fills in defaults in place.
    if (!tool.validate(structuredClone(args))) {
      const failure = describeFailure(tool.validate.errors);
      problems.push({ ...at, code: 'SCHEMA_MISMATCH', message: failure.message });
    }
  }
  return problems;
}

/** The examples of every Markdown file in a plugin's skill/ folder, against its tools and `extraTools` (the core's). */
export function checkPluginSkills(plugin: Pick<DiscoveredPlugin, 'dir' | 'tools'>, extraTools: readonly ToolEntry[] = []): { examples: number; problems: SkillExampleProblem[] } {
  const skillDir = join(plugin.dir, 'skill');
  let files: string[];
  try {
    files = readdirSync(skillDir).filter((f) => f.endsWith('.md')).sort();
  } catch {
    return { examples: 0, problems: [] }; // no hand-written skill: one is generated from the manifest
  }
  let examples = 0;
  const problems: SkillExampleProblem[] = [];
  for (const name of files) {
    const text = readFileSync(join(skillDir, name), 'utf8');
    examples += extractSkillExamples(text).length;
    problems.push(...checkSkillExamples(join('skill', name), text, [...plugin.tools, ...extraTools]));
  }
  return { examples, problems };
}
