// A real core in a process of its own, for fault tests that kill -9 it and start it again
// on the same run directory (what Compose's restart policy does after a crash).
//
//   node dist/core/test/support/core-child.js <runDir> <pluginsDir> <auditFile> <configFile>
//
// Opens one session for the group "family" and prints one JSON line on stdout once no
// plugin is starting any more, or after 30 s regardless:
//   {"socketPath": "...", "states": {"<plugin>": "<state>", ...}}
import { dirname, join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { Core } from '../../src/core.js';

const [runDir, pluginsDir, auditFile, configFile] = process.argv.slice(2);
// The data folder beside the run folder, as in the appliance (the plugin host's is the same).
const core = await Core.start({ runDir, pluginsDir, auditFile, config: loadConfig(configFile), eventKeysFile: join(dirname(runDir), 'data', 'event-keys.sqlite') });
const session = await core.openSession('family');
const states = (): Record<string, string> => Object.fromEntries(core.catalog.pluginNames().map((n) => [n, core.catalog.state(n) ?? 'unknown']));
const deadline = Date.now() + 30_000;
while (Object.values(states()).includes('starting') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
process.stdout.write(`${JSON.stringify({ socketPath: session.socketPath, states: states() })}\n`);
process.once('SIGTERM', () => void core.stop().then(() => process.exit(0)));
