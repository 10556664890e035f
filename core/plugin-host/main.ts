// The plugin host process. SIGTERM runs the same drain-and-shutdown as a core request.
import { existsSync } from 'node:fs';
import { validConfigOnceFixed, type CoreConfig } from '../src/config.js';
import { StartupError } from '../src/protocol/errors.js';
import { pathsFromEnv } from '../src/settings.js';
import { PluginHost } from './host.js';

async function main(): Promise<void> {
  const paths = pathsFromEnv();
  await configWritten(paths.configFile);
  const lostAfter = Number(process.env.CARAPACE_CORE_LOST_AFTER_MS);
  const host = new PluginHost({
    ...paths,
    config: await validConfig(paths.configFile),
    ...(lostAfter > 0 ? { coreLostAfterMs: lostAfter } : {}),
    egressSocket: process.env.CARAPACE_EGRESS_SOCKET || null,
  });
  host.onStopped = () => process.exit(0);
  // Compose's restart policy starts a fresh host, which publishes what this one held.
  host.onCoreLost = () => process.exit(1);
  process.once('SIGTERM', () => void host.stop());
  process.once('SIGINT', () => void host.stop());
  await host.start();
}

/** On a first start the core writes carapace.json: wait for it (bounded) rather than fail. */
async function configWritten(file: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  if (!existsSync(file)) process.stderr.write(`carapace plugin host: waiting for the core to write ${file}\n`);
  while (!existsSync(file) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
}

/** A broken carapace.json loads no plugin: wait for it to be fixed (the core's safe mode says what is wrong). */
function validConfig(file: string): Promise<CoreConfig> {
  return validConfigOnceFixed(file, (err) => process.stderr.write(`carapace plugin host: ${err.message}; no plugin runs until it is fixed (the console says so too)\n`));
}

main().catch((err: unknown) => {
  process.stderr.write(`carapace plugin host: ${err instanceof StartupError ? `${err.code}: ${err.message}` : String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
