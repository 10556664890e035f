// Safe mode: carapace.json is broken, so nothing may run (no agent starts, no plugin is
// loaded, nothing acts), yet the person must learn why where they look. The core serves
// only the console's login, its pages, the Overview and Checks (saying which file, line
// and column are wrong and what was expected) and the admin API's /health and /doctor
// (so `make doctor` says it too), and reads the file again every second: once it is
// valid, this server closes and the core starts as usual, without a restart.
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { requireBearer } from '../admin/http-api.js';
import type { AuditLog } from '../audit/audit-log.js';
import { validConfigOnceFixed, type CoreConfig } from '../config.js';
import { ConfigError, type ConfigProblem } from '../config-errors.js';
import { registerLogin, registerShell, type ConsoleSessions } from '../console/console-login.js';
import type { Report } from '../doctor/checks.js';
import { APP_VERSION } from '../version.js';

const log = pino({ base: { service: 'core' } });

export interface SafeModeOptions {
  configFile: string;
  host: string;
  port: number;
  token: string;
  sessions: ConsoleSessions;
  audit: AuditLog;
  secureCookie?: boolean;
  /** How often the file is read again (ms). */
  pollMs?: number;
}

/** What the Checks page and `make doctor` show: one failed check, with its fix. */
export function safeModeReport(problem: ConfigProblem): Report {
  return {
    ok: false,
    checks: [
      {
        id: 'config',
        title: 'Configuration (carapace.json)',
        status: 'fail',
        detail: `${problem.file}, line ${problem.line}, column ${problem.column}: ${problem.message}. Nothing runs until it is fixed: no agent starts, no plugin acts.`,
        fix: `edit volumes/config/carapace.json at line ${problem.line}, column ${problem.column} (carapace.json.bak, if there, is the last file the core wrote); the core takes the fixed file within a second, or run docker compose restart`,
      },
    ],
  };
}

/** Serves the safe mode until `configFile` is valid; resolves with that configuration. */
export async function safeModeUntilFixed(first: ConfigProblem, options: SafeModeOptions): Promise<CoreConfig> {
  let problem = first;
  const app = await serve(() => problem, options);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  log.error({ file: problem.file, line: problem.line, column: problem.column, problem: problem.message, console: `http://${options.host}:${port}` }, 'safe mode: carapace.json is broken; nothing runs until it is fixed');
  options.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'error', severity: 'CRITICAL', reason: `safe mode: ${problem.file} line ${problem.line}, column ${problem.column}: ${problem.message}` });
  try {
    const config = await validConfigOnceFixed(options.configFile, (err) => {
      if (err.message === new ConfigError(problem).message) return; // the first reading: already said
      problem = err.problem;
      log.error({ line: problem.line, column: problem.column, problem: problem.message }, 'carapace.json changed but is still broken');
    }, options.pollMs);
    log.info({ file: options.configFile }, 'carapace.json is valid again: leaving safe mode');
    options.audit.record({ group: null, session: null, source: 'core', topic: null, correlation: null, stage: 'core', outcome: 'ok', reason: 'carapace.json fixed: safe mode over, starting' });
    return config;
  } finally {
    await app.close();
  }
}

async function serve(problem: () => ConfigProblem, options: SafeModeOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024, forceCloseConnections: true });
  const refusal = () => ({ code: 'CONFIG_INVALID', message: `safe mode: ${new ConfigError(problem()).message}. Nothing runs until it is fixed.` });
  await registerLogin(app, {
    token: options.token,
    sessions: options.sessions,
    secureCookie: options.secureCookie,
    audit: options.audit,
  });
  await app.register(async (authed) => {
    await registerShell(authed);
    authed.get('/api/overview', async () => ({ version: APP_VERSION, uptime_s: Math.round(process.uptime()), safe_mode: problem() }));
    authed.get('/api/checks', async () => safeModeReport(problem()));
    authed.all('/api/*', async (_request, reply) => reply.code(503).send(refusal()));
    authed.all('/plugins/*', async (_request, reply) => reply.code(503).send(refusal()));
  });
  // The admin API (CLI, Compose's healthcheck), behind the same token as ever.
  await app.register(async (api) => {
    requireBearer(api, options.token);
    api.get('/health', async (_request, reply) => reply.code(503).send({ status: 'config_invalid', ...refusal(), problem: problem() }));
    api.get('/doctor', async () => safeModeReport(problem()));
  });
  await app.listen({ host: options.host, port: options.port });
  return app;
}
