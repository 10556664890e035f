// A plugin's handler, looked at without running it: found where the plugin host looks
// (plugin-host/load-handler.ts), parsed as an ES module, with a default export, and its
// `#sdk` import resolvable from where it lives. Its code is never executed here: a person
// may check a plugin folder they have not yet decided to trust.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { handlerPath } from '../../plugin-host/load-handler.js';

export interface HandlerProblem {
  code: 'HANDLER_MISSING' | 'HANDLER_NOT_COMPILED' | 'HANDLER_SYNTAX' | 'HANDLER_NO_DEFAULT_EXPORT' | 'SDK_UNRESOLVED';
  file: string;
  line?: number;
  message: string;
}

const SDK_IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"]#sdk['"]/;
const DEFAULT_EXPORT = /\bexport\s+default\b|\bexport\s*\{[^}]*\bas\s+default\b/;

/** Parses `source` as an ES module in a child Node (--check: nothing runs); the error or null. */
function syntaxError(source: string): { line?: number; message: string } | null {
  const run = spawnSync(process.execPath, ['--input-type=module', '--check'], { input: source, encoding: 'utf8', timeout: 10_000 });
  if (run.status === 0) return null;
  const line = /^\[stdin\]:(\d+)/m.exec(run.stderr)?.[1];
  const message = /^SyntaxError: .*$/m.exec(run.stderr)?.[0] ?? (run.error ? String(run.error.message) : run.stderr.trim().split('\n').pop() ?? 'does not parse');
  return { ...(line ? { line: Number(line) } : {}), message };
}

/**
 * The handler of plugin `name` in `dir` (or compiled in one of `handlersDirs`, colon-separated,
 * as the plugin host is told), and what is wrong with it. `file` is relative to `dir` when inside it.
 */
export function checkHandler(name: string, dir: string, handlersDirs: string): { file: string | null; problems: HandlerProblem[] } {
  const file = handlerPath(name, dir, handlersDirs);
  if (!file) {
    if (existsSync(join(dir, 'handler.ts'))) {
      return { file: null, problems: [{ code: 'HANDLER_NOT_COMPILED', file: 'handler.ts', message: 'handler.ts has not been compiled (make build); a drop-in plugin needs a plain handler.js' }] };
    }
    return { file: null, problems: [{ code: 'HANDLER_MISSING', file: 'handler.js', message: 'no handler.js in the folder: the plugin host would fail this plugin (CONFIG_ERROR)' }] };
  }
  const shown = file.startsWith(`${dir}/`) ? file.slice(dir.length + 1) : file;
  const source = readFileSync(file, 'utf8');
  const problems: HandlerProblem[] = [];
  const broken = syntaxError(source);
  if (broken) return { file, problems: [{ code: 'HANDLER_SYNTAX', file: shown, ...(broken.line ? { line: broken.line } : {}), message: `does not parse as an ES module: ${broken.message}` }] };
  if (!DEFAULT_EXPORT.test(source)) {
    problems.push({ code: 'HANDLER_NO_DEFAULT_EXPORT', file: shown, message: 'no `export default`: the plugin host loads the default export, a class (or object) with initialize() and handleRequest()' });
  }
  if (SDK_IMPORT.test(source)) {
    try {
      createRequire(file).resolve('#sdk');
    } catch {
      problems.push({
        code: 'SDK_UNRESOLVED',
        file: shown,
        line: source.slice(0, SDK_IMPORT.exec(source)!.index).split('\n').length,
        message: "imports '#sdk', which does not resolve from this folder (only inside the Carapace project): use services.errors (ToolError, InitError, AbortedBeforeActing) from initialize() instead",
      });
    }
  }
  return { file, problems };
}
