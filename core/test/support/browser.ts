// The console's browser tests: Debian's Chromium driven by puppeteer-core, and the login
// every one of them starts with.
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
}

/** On the login page: the token, then wherever the console sends the person. */
export async function logIn(page: Page, token: string): Promise<void> {
  await page.waitForSelector('#token');
  await page.type('#token', token);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}
