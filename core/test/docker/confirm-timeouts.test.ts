// In the agent image, Claude Code's Bash tool must wait longer than a call pending a
// person's confirmation may take (confirmation timeout + handler timeout), or the agent
// abandons the call while the person is still reading the prompt.
import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseConfig } from '../../src/config.js';
import { AGENT_IMAGE } from '../support/agents.js';

const run = promisify(execFile);

describe('agent image: Bash timeout above the confirmation wait', () => {
  it('the managed settings set BASH_DEFAULT_TIMEOUT_MS above the default confirmation + handler timeout', async () => {
    const script = "const s=JSON.parse(require('fs').readFileSync('/etc/claude-code/managed-settings.json','utf8'));console.log(JSON.stringify(s.env))";
    const { stdout } = await run('docker', ['run', '--rm', '--network', 'none', '--user', '1000', '--entrypoint', 'node', AGENT_IMAGE, '-e', script]);
    const env = JSON.parse(stdout) as Record<string, string>;
    const defaults = parseConfig({});
    const wait = defaults.confirmation_timeout_ms + defaults.handler_timeout_ms;
    expect(Number(env.BASH_DEFAULT_TIMEOUT_MS)).toBeGreaterThan(wait);
    expect(Number(env.BASH_MAX_TIMEOUT_MS)).toBeGreaterThanOrEqual(Number(env.BASH_DEFAULT_TIMEOUT_MS));
  }, 60_000);
});
