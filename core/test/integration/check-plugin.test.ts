// `make check-plugin` and `make plugin` as a person runs them: the real CLIs as processes,
// on plugins/_template, on the bundled plugins, and on copies of the template broken one
// way each, in a folder outside the project (as a drop-in would be).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../harness.js';

const CHECK = join(ROOT, 'dist/core/src/plugins/check-plugin.js');
const NEW = join(ROOT, 'dist/core/src/plugins/new-plugin.js');
let work: string;

function run(script: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', cwd: work, timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A copy of the template named `name`, changed by `edit` (given the folder). */
function brokenCopy(name: string, edit: (dir: string) => void): string {
  const dir = join(work, name);
  cpSync(join(ROOT, 'plugins/_template'), dir, { recursive: true });
  edit(dir);
  return dir;
}

function replaceIn(file: string, from: string, to: string): void {
  const text = readFileSync(file, 'utf8');
  if (!text.includes(from)) throw new Error(`${file} does not hold ${from}`);
  writeFileSync(file, text.replace(from, to));
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'cp-check-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('check-plugin', () => {
  it('passes the template, warning only that discovery passes its "_" folder over', () => {
    const r = run(CHECK, join(ROOT, 'plugins/_template'));
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/warning NAME_SKIPPED/);
    expect(r.stdout).not.toMatch(/: error /);
    expect(r.stdout).toMatch(/check-plugin _template: ok: 0 error\(s\), 1 warning\(s\); 1 tool\(s\), 1 skill example\(s\) checked/);
  });

  it.each(['calendar', 'email', 'github-bugs', 'memory', 'reminders', 'tasks', 'telegram', 'webchat'])('passes the bundled plugin %s (its compiled handler found)', (name) => {
    const r = run(CHECK, join(ROOT, 'plugins', name));
    expect(r.stdout).toMatch(new RegExp(`check-plugin ${name}: ok: 0 error\\(s\\), 0 warning\\(s\\)`));
    expect(r.status).toBe(0);
  });

  it.each([
    ['a manifest failing the schema', 'badmanifest', (d: string) => replaceIn(join(d, 'manifest.json'), '"version": "0.1.0"', '"version": "one"'), /badmanifest\/manifest\.json: error MANIFEST_INVALID: version: version must match pattern/],
    ['a manifest that is not JSON', 'notjson', (d: string) => replaceIn(join(d, 'manifest.json'), '"provides": {', '"provides": {,'), /notjson\/manifest\.json: error MANIFEST_INVALID: manifest\.json is not valid JSON/],
    ['a tool schema that does not compile', 'badschema', (d: string) => replaceIn(join(d, 'manifest.json'), '"minLength": 1, "maxLength": 100', '"minLength": 1, "maxLenght": 100'), /badschema\/manifest\.json: error MANIFEST_INVALID: tool "template_hello": arguments_schema does not compile: .*maxLenght/],
    ['a skill example its tool\'s schema refuses', 'badexample', (d: string) => replaceIn(join(d, 'skill/SKILL.md'), '{"name":"Ada"}', '{"name":"Ada","shout":true}'), /badexample\/skill\/SKILL\.md:9: error SKILL_SCHEMA_MISMATCH: ipc tool\.invoke\.template_hello: additionalProperties "shout" not allowed/],
    ['a skill example of a tool nobody has', 'unknowntool', (d: string) => replaceIn(join(d, 'skill/SKILL.md'), 'tool.invoke.template_hello', 'tool.invoke.template_helo'), /unknowntool\/skill\/SKILL\.md:9: error SKILL_UNKNOWN_TOOL/],
    ['no handler', 'nohandler', (d: string) => unlinkSync(join(d, 'handler.js')), /nohandler\/handler\.js: error HANDLER_MISSING: no handler\.js in the folder/],
    ['a handler that does not parse', 'syntax', (d: string) => replaceIn(join(d, 'handler.js'), 'async shutdown() {}', 'async shutdown() {'), /syntax\/handler\.js:\d+: error HANDLER_SYNTAX: does not parse as an ES module: SyntaxError/],
    ['a handler without a default export', 'nodefault', (d: string) => replaceIn(join(d, 'handler.js'), 'export default class', 'export class'), /nodefault\/handler\.js: error HANDLER_NO_DEFAULT_EXPORT/],
    ['a handler importing #sdk outside the project', 'sdk', (d: string) => replaceIn(join(d, 'handler.js'), "import { join } from 'node:path';", "import { join } from 'node:path';\nimport { ToolError } from '#sdk';"), /sdk\/handler\.js:14: error SDK_UNRESOLVED: imports '#sdk', which does not resolve from this folder/],
    ['a wildcard host that matches nothing', 'wildcard', (d: string) => replaceIn(join(d, 'manifest.json'), '"hosts": []', '"hosts": ["*.com"]'), /wildcard\/manifest\.json: error NETWORK_INVALID: network\.hosts: "\*\.com": a wildcard needs a domain of two labels/],
    ['a port out of range', 'port', (d: string) => replaceIn(join(d, 'manifest.json'), '"hosts": []', '"hosts": ["api.example.com:70000"]'), /port\/manifest\.json: error NETWORK_INVALID: network\.hosts: "api\.example\.com:70000": port 70000 is not 1 to 65535/],
    ['a config_hosts pointer to an undeclared setting', 'pointer', (d: string) => replaceIn(join(d, 'manifest.json'), '"config_hosts": []', '"config_hosts": ["/server"]'), /pointer\/manifest\.json: error NETWORK_INVALID: network\.config_hosts: "\/server" is not a property config_schema declares/],
    ['a tool named like an intrinsic', 'reserved', (d: string) => { replaceIn(join(d, 'manifest.json'), '"name": "template_hello"', '"name": "list_tools"'); replaceIn(join(d, 'skill/SKILL.md'), '{"name":"Ada"}', '{}'); }, /reserved\/manifest\.json: error RESERVED_TOOL: tool "list_tools"/],
    ['a tool a bundled plugin has', 'clash', (d: string) => replaceIn(join(d, 'manifest.json'), '"name": "template_hello"', '"name": "send_telegram"'), /clash\/manifest\.json: error DUPLICATE_TOOL: tool "send_telegram" is also the bundled plugin "telegram"'s/],
    ['a folder name that is not a plugin name', 'Bad.Name', () => undefined, /Bad\.Name: error NAME_INVALID/],
    ['a connection check declared without its export', 'nocheck', (d: string) => replaceIn(join(d, 'manifest.json'), '"hooks": []', '"hooks": ["connection_check"]'), /nocheck\/manifest\.json: error CONNECTION_CHECK_MISSING: provides\.hooks declares "connection_check", but the handler module exports no checkConnections/],
  ])('fails %s, saying where and what', (_what, name, edit, expected) => {
    const r = run(CHECK, brokenCopy(name, edit));
    expect(r.stdout).toMatch(expected);
    expect(r.stdout).toMatch(/FAILED: [1-9]\d* error\(s\)/);
    expect(r.status).toBe(1);
  });

  it('says how it is used, exit status 2', () => {
    const r = run(CHECK);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/usage: check-plugin <plugin folder>/);
  });
});

describe('make plugin (new-plugin)', () => {
  it('copies the template under the new name, renames its tool and skill, and the copy passes the check', () => {
    const into = join(work, 'drop-ins');
    const r = run(NEW, 'my-weather', into);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/its tool is my_weather_hello/);
    const dir = join(into, 'my-weather');
    expect(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')).provides.tools[0].name).toBe('my_weather_hello');
    expect(readFileSync(join(dir, 'skill/SKILL.md'), 'utf8')).toMatch(/^name: my-weather$[\s\S]*ipc tool\.invoke\.my_weather_hello /m);
    expect(readFileSync(join(dir, 'handler.js'), 'utf8')).not.toMatch(/template_hello/);
    const check = run(CHECK, dir);
    expect(check.stdout).toMatch(/check-plugin my-weather: ok: 0 error\(s\), 0 warning\(s\)/);
    expect(check.status).toBe(0);
  });

  it('refuses a folder that exists, changing nothing', () => {
    const into = join(work, 'taken');
    mkdirSync(join(into, 'mine'), { recursive: true });
    writeFileSync(join(into, 'mine', 'keep.txt'), 'mine');
    const r = run(NEW, 'mine', into);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/EXISTS: .*mine exists already/);
    expect(existsSync(join(into, 'mine', 'manifest.json'))).toBe(false);
  });

  it.each([['Upper'], ['_hidden'], ['9lives'], ['a/b'], ['telegram']])('refuses the name %s', (name) => {
    const into = join(work, 'refused');
    const r = run(NEW, name, into);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(name === 'telegram' ? /NAME_TAKEN/ : /BAD_NAME/);
    expect(existsSync(into)).toBe(false);
  });
});
