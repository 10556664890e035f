// The plugin host process. SIGTERM runs the same drain-and-shutdown as a core request.
// It reads no configuration file: the core hands it each plugin's settings over the link.
import { StartupError } from '../src/protocol/errors.js';
import { pathsFromEnv } from '../src/settings.js';
import { PluginHost } from './host.js';

async function main(): Promise<void> {
  const paths = pathsFromEnv();
  const lostAfter = Number(process.env.CARAPACE_CORE_LOST_AFTER_MS);
  const host = new PluginHost({
    ...paths,
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

main().catch((err: unknown) => {
  process.stderr.write(`carapace plugin host: ${err instanceof StartupError ? `${err.code}: ${err.message}` : String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
