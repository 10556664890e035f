// Skills in Claude Code's format (.claude/skills/<name>/SKILL.md), one per healthy
// plugin plus one for the core's intrinsic tools. A plugin's own skill/ folder is used
// when it has one; otherwise the skill is generated from the manifest's schemas.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ToolCatalog, ToolSummary } from '../plugins/catalog.js';
import { RUN_PROGRAM_GUIDE, RUN_PROGRAM_NAME } from '../sandbox-runs/run-program-tool.js';
import { PROPOSE_WRITE_GUIDE } from '../proposed-writes/propose-write-tool.js';
import { PROPOSE_WRITE_NAME } from '../proposed-writes/proposed-change.js';
import { RUN_SKILL_NAME, SKILLS_GUIDE } from '../skills/run-skill-tool.js';

interface SchemaProperty {
  type?: string;
  enum?: unknown[];
  description?: string;
  default?: unknown;
  format?: string;
}

function exampleValue(p: SchemaProperty): unknown {
  if (p.enum?.length) return p.enum[0];
  if (p.type === 'integer' || p.type === 'number') return 1;
  if (p.type === 'boolean') return true;
  if (p.type === 'array') return [];
  if (p.type === 'object') return {};
  return p.format === 'date-time' ? '2026-01-01T17:00:00Z' : '...';
}

function toolSection(tool: ToolSummary): string {
  const schema = tool.arguments_schema as { properties?: Record<string, SchemaProperty>; required?: string[] };
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const example = Object.fromEntries([...required].map((name) => [name, exampleValue(properties[name] ?? {})]));
  const args = Object.entries(properties).map(([name, p]) => {
    const kind = p.enum ? `one of ${p.enum.map((v) => JSON.stringify(v)).join(', ')}` : p.format ? `${p.type ?? 'any'}, ${p.format}` : p.type ?? 'any';
    const extras = [required.has(name) ? 'required' : 'optional', p.default !== undefined ? `default ${JSON.stringify(p.default)}` : ''].filter(Boolean).join(', ');
    return `- \`${name}\` (${kind}; ${extras})${p.description ? `: ${p.description}` : ''}`;
  });
  const risk = tool.risk_level === 'high' ? ' The user must approve this on their side; wait for the answer.' : '';
  return [`## ${tool.name}`, `${tool.description}.${risk}`, '', '```', `ipc tool.invoke.${tool.name} '${JSON.stringify(example)}'`, '```', ...(args.length ? ['', ...args] : [])].join('\n');
}

/** `guides`: more about some tools, after all the sections (the core's run_program). */
export function generateSkill(name: string, description: string, tools: ToolSummary[], guides: string[] = []): string {
  return [
    '---',
    `name: ${name}`,
    `description: ${description.replace(/\n/g, ' ')} Tools: ${tools.map((t) => t.name).join(', ')}.`,
    '---',
    '',
    `# ${name}`,
    '',
    'Run these with Bash as `ipc tool.invoke.<tool> \'<json>\'`. The result is JSON on stdout. On failure ipc exits 1 and prints',
    '`{"code","message","retriable"}` on stderr: fix the arguments when `retriable` is false, otherwise try again later.',
    'Unknown fields are rejected.',
    '',
    ...tools.map(toolSection).join('\n\n').split('\n'),
    ...guides.flatMap((guide) => ['', ...guide.split('\n')]),
    '',
  ].join('\n');
}

/** Front matter is what makes Claude Code find a skill; add it to a hand-written one that lacks it. */
function withFrontMatter(text: string, name: string, description: string): string {
  return text.startsWith('---') ? text : `---\nname: ${name}\ndescription: ${description.replace(/\n/g, ' ')}\n---\n\n${text}`;
}

/** Writes every skill into `outDir` (mounted read-only at ~/.claude/skills). */
export function writeSkills(outDir: string, catalog: ToolCatalog): string[] {
  mkdirSync(outDir, { recursive: true });
  const available = catalog.available();
  const written: string[] = [];
  const core = available.filter((t) => catalog.lookup(t.name)?.owner === 'core');
  const coreDir = join(outDir, 'carapace-core');
  mkdirSync(coreDir, { recursive: true });
  const runs = core.some((t) => t.name === RUN_PROGRAM_NAME);
  const skills = core.some((t) => t.name === RUN_SKILL_NAME);
  const description = `Diagnose failures, list tools, show session and plugin health.${runs ? ' Run programs (Python, Node, sh) in a sandbox to compute, chart data, convert or read files (PDF, spreadsheets, images).' : ''}${skills ? ' Run skills: fetch web pages, search the web.' : ''}`;
  const guides = [...(runs ? [RUN_PROGRAM_GUIDE] : []), ...(skills ? [SKILLS_GUIDE] : []), ...(core.some((t) => t.name === PROPOSE_WRITE_NAME) ? [PROPOSE_WRITE_GUIDE] : [])];
  writeFileSync(join(coreDir, 'SKILL.md'), generateSkill('carapace-core', description, core, guides));
  written.push('carapace-core');

  for (const name of catalog.health().healthy) {
    const plugin = catalog.discovered(name);
    if (!plugin) continue;
    const tools = available.filter((t) => catalog.lookup(t.name)?.owner === name);
    const target = join(outDir, name);
    mkdirSync(target, { recursive: true });
    const skillDir = join(plugin.dir, 'skill');
    const files = existsSync(skillDir) ? readdirSync(skillDir).filter((f) => f.endsWith('.md')) : [];
    if (files.length > 0) {
      cpSync(skillDir, target, { recursive: true });
      const main = files.includes('SKILL.md') ? 'SKILL.md' : files[0];
      const text = withFrontMatter(readFileSync(join(skillDir, main), 'utf8'), name, plugin.manifest.description);
      writeFileSync(join(target, 'SKILL.md'), text);
    } else {
      writeFileSync(join(target, 'SKILL.md'), generateSkill(name, plugin.manifest.description, tools));
    }
    written.push(name);
  }
  return written;
}
