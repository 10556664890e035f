// `make check-plugin DIR=<folder>`: checks a plugin folder the way the core and the plugin
// host will load it (plugin-check.ts), without running its code. One line per finding,
// "<folder>/<file>[:line]: error|warning CODE: message", then a summary line.
// Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage.
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPluginFolder, type CheckReport, type Finding } from './plugin-check.js';

// dist/core/src/plugins → the project.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

function where(report: CheckReport, finding: Finding): string {
  const rel = relative(process.cwd(), report.dir);
  const shown = rel === '' ? '.' : rel.startsWith('..') ? report.dir : rel;
  const file = finding.file.startsWith('/') ? finding.file : finding.file === '.' ? shown : `${shown}/${finding.file}`;
  return finding.line ? `${file}:${finding.line}` : file;
}

function main(args: string[]): number {
  if (args.length !== 1 || args[0].startsWith('-')) {
    process.stderr.write('usage: check-plugin <plugin folder>   (make check-plugin DIR=<folder>)\n');
    return 2;
  }
  const report = checkPluginFolder(args[0], { root: ROOT });
  for (const f of report.findings) process.stdout.write(`${where(report, f)}: ${f.severity} ${f.code}: ${f.message}\n`);
  const errors = report.findings.filter((f) => f.severity === 'error').length;
  const warnings = report.findings.length - errors;
  const checked = `${report.tools} tool(s), ${report.examples} skill example(s)`;
  process.stdout.write(`check-plugin ${report.name}: ${errors === 0 ? 'ok' : 'FAILED'}: ${errors} error(s), ${warnings} warning(s); ${checked} checked\n`);
  return errors === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
