// Finds and instantiates a plugin's handler. Bundled plugins are compiled with the
// project (dist/plugins/<name>/handler.js); a plugin may also ship plain handler.js, or
// handler.ts where Node runs TypeScript itself.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InitError, type CheckConnections, type PluginHandler } from '../sdk/index.js';
import type { InitFailureCategory } from '../src/protocol/errors.js';

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET']);

/**
 * `handlersDirs` is a colon-separated list of folders holding compiled `<name>/handler.js`.
 * A plugin folder's own handler.js comes first; then, where Node strips TypeScript types
 * itself (22.6+; the appliance's image), its handler.ts: a drop-in needs no build step.
 */
export function handlerPath(name: string, pluginDir: string, handlersDirs: string): string | null {
  const compiled = handlersDirs.split(':').filter(Boolean).map((dir) => join(dir, name, 'handler.js'));
  const typescript = (process.features as { typescript?: unknown }).typescript ? [join(pluginDir, 'handler.ts')] : [];
  for (const candidate of [join(pluginDir, 'handler.js'), ...compiled, ...typescript]) {
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

function isHandler(value: unknown): value is PluginHandler {
  const h = value as Partial<PluginHandler> | null;
  return typeof h === 'object' && h !== null && typeof h.initialize === 'function' && typeof h.handleRequest === 'function';
}

/** The module's default export: a handler object or a class whose instances are handlers. */
export async function loadHandler(file: string): Promise<PluginHandler> {
  const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
  const exported = mod.default;
  const candidate = typeof exported === 'function' ? new (exported as new () => unknown)() : exported;
  if (!isHandler(candidate)) throw new InitError('CONFIG_ERROR', `${file}: default export must implement initialize() and handleRequest()`);
  return candidate;
}

/** The module's `checkConnections` export (a connection check for the Checks page), or null: it has none. */
export async function loadConnectionChecks(file: string): Promise<CheckConnections | null> {
  const mod = (await import(pathToFileURL(file).href)) as { checkConnections?: unknown };
  return typeof mod.checkConnections === 'function' ? (mod.checkConnections as CheckConnections) : null;
}

/** A lifecycle call that did not finish in time (initialize, shutdown). */
export class TimeoutError extends Error {}

/** Maps an initialization failure to the closed category the agent may see. */
export function categorize(err: unknown): InitFailureCategory {
  if (err instanceof InitError) return err.category;
  // An initialize() that never finishes is almost always waiting on a server.
  if (err instanceof TimeoutError) return 'NETWORK_ERROR';
  const e = err as { code?: unknown; status?: unknown; statusCode?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return 'NETWORK_ERROR';
  const status = e?.status ?? e?.statusCode;
  if (status === 401 || status === 403) return 'AUTH_ERROR';
  return 'INTERNAL_ERROR';
}
