// `make plugin NAME=<name>`: a new plugin from plugins/_template in the drop-in folder
// (volumes/plugins/<name>/, or the folder given second), its tool and skill renamed after
// it (tool names are global: "template_hello" would clash with the next copy), then checked.
// Refuses a bad name and an existing folder. Exit status: 0 made, 1 refused, 2 usage.
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPluginFolder } from './plugin-check.js';
import { PLUGIN_NAME_PATTERN } from './manifest.js';

// dist/core/src/plugins → the project.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const TEMPLATE = join(ROOT, 'plugins/_template');
const TEMPLATE_TOOL = 'template_hello';
/** A plugin name that also makes a valid tool name "<name>_hello" (hyphens become "_"). */
const NEW_NAME = /^[a-z][a-z0-9_-]{0,57}$/;
const RENAMED_FILES = ['manifest.json', 'handler.js', 'skill/SKILL.md', 'README.md'];

export type NewPluginResult = { ok: true; dir: string; tool: string } | { ok: false; code: 'BAD_NAME' | 'EXISTS' | 'NAME_TAKEN'; message: string };

function exists(path: string): boolean {
  try {
    lstatSync(path); // a dangling symlink is in the way too
    return true;
  } catch {
    return false;
  }
}

export function newPlugin(name: string, into: string): NewPluginResult {
  if (!NEW_NAME.test(name) || !PLUGIN_NAME_PATTERN.test(name)) {
    return { ok: false, code: 'BAD_NAME', message: `"${name}" is not a plugin name: lower-case letters, digits, "-" and "_", starting with a letter, at most 58 characters` };
  }
  if (existsSync(join(ROOT, 'plugins', name))) return { ok: false, code: 'NAME_TAKEN', message: `a bundled plugin is named "${name}": pick another name` };
  const dir = join(into, name);
  if (exists(dir)) return { ok: false, code: 'EXISTS', message: `${dir} exists already: nothing was changed` };
  const tool = `${name.replace(/-/g, '_')}_hello`;
  const className = `${name.split(/[-_]/).map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('')}Plugin`;
  mkdirSync(into, { recursive: true });
  cpSync(TEMPLATE, dir, { recursive: true, errorOnExist: true, force: false });
  for (const file of RENAMED_FILES.map((f) => join(dir, f)).filter(existsSync)) {
    const text = readFileSync(file, 'utf8')
      .replaceAll(TEMPLATE_TOOL, tool)
      .replace(/^name: template$/m, `name: ${name}`)
      .replaceAll('TemplatePlugin', className);
    writeFileSync(file, text);
  }
  return { ok: true, dir, tool };
}

function main(args: string[]): number {
  if (args.length < 1 || args.length > 2 || args[0] === '') {
    process.stderr.write('usage: new-plugin <name> [<folder>]   (make plugin NAME=<name>; the folder defaults to volumes/plugins)\n');
    return 2;
  }
  const result = newPlugin(args[0], resolve(args[1] ?? join(ROOT, 'volumes/plugins')));
  if (!result.ok) {
    process.stderr.write(`make plugin: ${result.code}: ${result.message}\n`);
    return 1;
  }
  const rel = relative(process.cwd(), result.dir);
  const shown = rel === '' || rel.startsWith('..') ? result.dir : rel;
  process.stdout.write(`made ${shown}/ from plugins/_template; its tool is ${result.tool}\n`);
  const report = checkPluginFolder(result.dir, { root: ROOT });
  for (const f of report.findings) process.stdout.write(`  ${f.severity} ${f.code}: ${f.file}: ${f.message}\n`);
  process.stdout.write(`next: edit it, \`make check-plugin DIR=${shown}\`, then \`docker compose restart\`\n`);
  return 0;
}

// Run as a program, not when imported (the tests call newPlugin()).
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
