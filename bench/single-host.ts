// The baseline plugin host of bench/plugin-processes.ts: the real PluginHost with every
// plugin inside the host's own process, the shape the host had before one process per
// plugin. Started by bench/core-process.ts when BENCH_HOST_MAIN names this file.
import { pathsFromEnv } from '../core/src/settings.js';
import { PluginHost } from '../core/plugin-host/host.js';

const paths = pathsFromEnv();
const host = new PluginHost({ ...paths, inProcessPlugins: true });
host.onStopped = () => process.exit(0);
host.onCoreLost = () => process.exit(1);
process.once('SIGTERM', () => void host.stop());
await host.start();
