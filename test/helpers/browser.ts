/**
 * A real headless Chromium (Debian's, /usr/bin/chromium unless SLESS_CHROMIUM says otherwise) driven
 * through playwright-core, which brings no browser of its own. Screenshots go to SLESS_SCREENSHOTS
 * when it names a directory, and nowhere otherwise.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { pollUntil } from './poll-until.js';

export const CHROMIUM = process.env.SLESS_CHROMIUM ?? '/usr/bin/chromium';

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (test/system-packages.sh does)`);
  // Root cannot use Chromium's own sandbox; the pages are sless's own dashboard.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/** Where a page errors or logs a failure, the test sees it: pages collect them here. */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return problems;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.SLESS_SCREENSHOTS;
  if (!dir) return;
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/** The text of the first element `selector` matches, trimmed; undefined while there is none. */
export async function textOf(page: Page, selector: string): Promise<string | undefined> {
  const locator = page.locator(selector).first();
  if ((await locator.count()) === 0) return undefined;
  return (await locator.textContent())?.trim();
}

/** Waits until the element's text satisfies `ok`; on time-out, says what the page showed last. */
export function waitForText(
  page: Page,
  selector: string,
  ok: (text: string) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<string> {
  return waitForTextRead(() => textOf(page, selector), selector, ok, what, timeoutMs);
}

/** The wait of `waitForText`, over any way of reading an element's text (each browser driver has one). */
export function waitForTextRead(
  read: () => Promise<string | undefined>,
  selector: string,
  ok: (text: string) => boolean,
  what: string,
  timeoutMs: number,
): Promise<string> {
  return pollUntil(
    `${what} (${selector})`,
    async () => {
      const text = await read();
      return text !== undefined && ok(text) ? text : undefined;
    },
    timeoutMs,
    100,
  );
}
