// .env.example is what a user reads to fill in .env: every variable compose.yaml takes
// from the environment must be documented there (set, or as a commented default).
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../harness.js';

/** Names in `${NAME}` / `${NAME:-default}` outside comment lines. */
function composeVariables(text: string): string[] {
  const names = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .flatMap((line) => [...line.matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]));
  return [...new Set(names)].sort();
}

describe('.env.example', () => {
  it('documents every variable compose.yaml reads', () => {
    const documented = new Set([...readFileSync(join(ROOT, '.env.example'), 'utf8').matchAll(/^#? ?([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    const variables = composeVariables(readFileSync(join(ROOT, 'compose.yaml'), 'utf8'));
    expect(variables).toContain('ANTHROPIC_API_KEY'); // the parse found them at all
    expect(variables.filter((name) => !documented.has(name))).toEqual([]);
  });
});
