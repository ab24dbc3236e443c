/**
 * A real headless Firefox (Debian's firefox-esr, /usr/bin/firefox-esr unless SLESS_FIREFOX says
 * otherwise) driven through puppeteer-core over WebDriver BiDi; puppeteer-core brings no browser of
 * its own. Pages collect their errors as the Chromium helper's do.
 */
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { waitForTextRead } from './browser.js';

export const FIREFOX = process.env.SLESS_FIREFOX ?? '/usr/bin/firefox-esr';

/**
 * Firefox over WebDriver BiDi cannot emulate a colour scheme per page, so the scheme is the
 * browser's own preference, set at launch: one browser per scheme.
 */
export async function launchFirefox(scheme: 'light' | 'dark' = 'light'): Promise<Browser> {
  if (!existsSync(FIREFOX))
    throw new Error(`no Firefox at ${FIREFOX}: apt-get install firefox-esr (test/system-packages.sh does)`);
  return puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    extraPrefsFirefox: { 'layout.css.prefers-color-scheme.content-override': scheme === 'dark' ? 0 : 1 },
  });
}

export function watchFirefoxPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) =>
    problems.push(`pageerror: ${error instanceof Error ? error.message : String(error)}`),
  );
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return problems;
}

/** The trimmed text of the first element `selector` matches; undefined while there is none. */
export async function firefoxTextOf(page: Page, selector: string): Promise<string | undefined> {
  const element = await page.$(selector);
  if (!element) return undefined;
  const text = await element.evaluate((node) => node.textContent);
  await element.dispose();
  return text?.trim();
}

export function waitForFirefoxText(
  page: Page,
  selector: string,
  ok: (text: string) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<string> {
  return waitForTextRead(() => firefoxTextOf(page, selector), selector, ok, what, timeoutMs);
}
