// The console's browser tests: Debian's Chromium driven by puppeteer-core, and the login
// every one of them starts with.
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type HTTPResponse, type Page } from 'puppeteer-core';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
}

/**
 * On the login page: the token, then wherever the console sends the person, until its
 * navigation shows. A login that ends elsewhere says where, with what the page said and
 * every request that failed on the way (a bare selector timeout told nothing).
 */
export async function logIn(page: Page, token: string, shell: string | null = 'nav .brand'): Promise<void> {
  const seen: string[] = [];
  const onResponse = (r: HTTPResponse) => { if (r.status() >= 400) seen.push(`${r.request().method()} ${new URL(r.url()).pathname}: ${r.status()}`); };
  const onFailed = (r: { url(): string; failure(): { errorText: string } | null }) => seen.push(`${new URL(r.url()).pathname}: ${r.failure()?.errorText}`);
  const onError = (e: unknown) => seen.push(`page error: ${String(e)}`);
  page.on('response', onResponse).on('requestfailed', onFailed).on('pageerror', onError);
  try {
    await page.waitForSelector('#token');
    await page.type('#token', token);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    if (shell) await page.waitForSelector(shell, { timeout: 60_000 });
  } catch (err) {
    const text = await page.evaluate(() => document.body?.innerText.slice(0, 300)).catch(() => '?');
    throw new Error(`login did not reach the console: at ${page.url()} (${JSON.stringify(text)}); failed on the way: ${seen.join('; ') || 'nothing'}; ${String(err)}`);
  } finally {
    page.off('response', onResponse).off('requestfailed', onFailed).off('pageerror', onError);
  }
}
