// What every plugin panel (servePanel) does alike: serve its page files, answer JSON, and
// read a small JSON body. A panel answers only the console's proxy, which checked the
// session and CSRF token before; nothing here is cached (a panel shows what is true now).
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/**
 * The folder `<plugin>/panel` in the source tree of a bundled plugin, from the compiled
 * module's `import.meta.url` (dist/plugins/<plugin>/x.js): the page files are not compiled.
 */
export function bundledPanelFolder(moduleUrl: string, plugin: string): string {
  return join(dirname(fileURLToPath(moduleUrl)), '../../../plugins', plugin, 'panel');
}

/**
 * Serves `/` as `index.html` and `/<file>` for each of `files` from `folder` (GET only);
 * answers false, sending nothing, for any other request.
 */
export function panelPages(folder: string, files: readonly string[]): (req: IncomingMessage, res: ServerResponse) => boolean {
  const pages = new Map<string, string>([['/', 'index.html'], ...files.map((f): [string, string] => [`/${f}`, f])]);
  return (req, res) => {
    const file = req.method === 'GET' ? pages.get(new URL(req.url ?? '/', 'http://panel').pathname) : undefined;
    if (file === undefined) return false;
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    res.end(readFileSync(join(folder, file)));
    return true;
  };
}

export function replyJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/** The request's body as a JSON object; null when it is larger than `maxBytes`, not JSON, or not an object. */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) return null;
    chunks.push(chunk);
  }
  try {
    const value = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
