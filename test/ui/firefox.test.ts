/**
 * The dashboard in a real headless Firefox (Debian's firefox-esr through puppeteer-core) against the
 * real `sless dev` on examples-repo/: the five examples Ready, the event stream live, a commit that
 * moves the serving commit on the open page without a reload, an action driven from the keyboard, no
 * page error, and text contrast of at least 7:1 in the light and the dark scheme. The Chromium suite
 * covers every feature; this one proves the page is not Chromium-only.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SlessFunction } from '../../src/core/resources.js';
import { short } from '../../ui/src/format.js';
import { CONTRAST_SCRIPT, type ContrastReport } from '../helpers/contrast.js';
import { type ExamplesDev, startExamplesDev } from '../helpers/examples-dev.js';
import { firefoxTextOf, launchFirefox, waitForFirefoxText, watchFirefoxPage } from '../helpers/firefox.js';
import { git } from '../helpers/git.js';
import type { SlessProcess } from '../helpers/sless-process.js';

const EXAMPLES = ['hello-go', 'hello-node', 'hello-python', 'ticks-node', 'time-node'];
const card = (kind: string, name: string) => `[data-kind="${kind}"][data-name="${name}"]`;
const fnField = (name: string, field: string) => `${card('Function', name)} [data-field="${field}"]`;

describe('the dashboard in Firefox', { timeout: 5 * 60_000 }, () => {
  let sless: SlessProcess;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  let dev: ExamplesDev | undefined;
  let repo: string;

  beforeAll(async () => {
    dev = await startExamplesDev('ui-firefox');
    ({ sless, repo } = dev);
    browser = await launchFirefox();
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    problems = watchFirefoxPage(page);
  }, 4 * 60_000);

  afterAll(async () => {
    await browser?.close();
    await dev?.close();
  });

  it('shows the five examples Ready, with the event stream live', async () => {
    await sless.settled();
    await page.goto(`${sless.url}/ui/`);
    await waitForFirefoxText(page, '#live', (t) => t === 'live', 'the event stream is live');
    for (const name of EXAMPLES)
      await waitForFirefoxText(
        page,
        fnField(name, 'phase'),
        (t) => t === 'Ready',
        `${name} Ready`,
        4 * 60_000,
      );
    expect(await page.$$eval('[data-kind="Function"]', (cards) => cards.length)).toBe(EXAMPLES.length);
    const { status } = (await (
      await sless.call('/v1/namespaces/default/functions/hello-node')
    ).json()) as SlessFunction;
    expect(await firefoxTextOf(page, fnField('hello-node', 'servingCommit'))).toBe(
      short(status?.servingCommit),
    );
  });

  it('a commit moves the serving commit on the open page, without a reload', async () => {
    await page.evaluate(() => {
      (globalThis as { notReloaded?: boolean }).notReloaded = true;
    });
    const handler = join(repo, 'functions/hello-node/handler.js');
    await writeFile(
      handler,
      (await readFile(handler, 'utf8')).replace(
        'path: event.path,',
        "path: event.path,\n    seenBy: 'firefox',",
      ),
    );
    await git(repo, 'commit', '--quiet', '-am', 'hello-node says who saw it');
    const sha = await git(repo, 'rev-parse', 'HEAD');
    await waitForFirefoxText(
      page,
      fnField('hello-node', 'servingCommit'),
      (t) => t === short(sha),
      'the new serving commit',
    );
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    const body = (await (await sless.call('/fn/default/hello-node')).json()) as { seenBy?: string };
    expect(body.seenBy).toBe('firefox');
  });

  it('is usable from the keyboard: Tab to "Sync now", Enter, and the outcome is announced', async () => {
    await page.$eval('#notice', (box) => {
      box.textContent = '';
    });
    await page.evaluate(() =>
      (
        globalThis as unknown as { document: { activeElement: { blur?(): void } | null } }
      ).document.activeElement?.blur?.(),
    );
    let focused = '';
    for (let presses = 0; presses < 20 && focused !== 'sync'; presses++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(
        () =>
          (
            globalThis as unknown as {
              document: { activeElement: { getAttribute(n: string): string | null } | null };
            }
          ).document.activeElement?.getAttribute('data-action') ?? '',
      );
    }
    expect(focused).toBe('sync');
    await page.keyboard.press('Enter');
    await waitForFirefoxText(page, '#notice', (t) => t.startsWith('Sync of examples done'), 'sync outcome');
    expect(await page.$eval('#notice', (box) => box.getAttribute('role'))).toBe('alert');
  });

  it('keeps text contrast at 7:1 or more in the light and the dark scheme, with no page error', async () => {
    const dark = await launchFirefox('dark');
    try {
      for (const [scheme, shownIn] of [
        ['light', browser],
        ['dark', dark],
      ] as const) {
        const shown = await shownIn.newPage();
        await shown.setViewport({ width: 1400, height: 1000 });
        const shownProblems = watchFirefoxPage(shown);
        await shown.goto(`${sless.url}/ui/`);
        await waitForFirefoxText(
          shown,
          fnField('hello-node', 'phase'),
          (t) => t === 'Ready',
          `${scheme} page`,
        );
        // The scheme took effect: the page's background is the scheme's own.
        expect(await shown.evaluate('getComputedStyle(document.body).backgroundColor'), scheme).toBe(
          scheme === 'light' ? 'rgb(246, 247, 249)' : 'rgb(18, 20, 24)',
        );
        const report = (await shown.evaluate(CONTRAST_SCRIPT)) as ContrastReport;
        expect(report.checked, scheme).toBeGreaterThan(50);
        const lowest = report.lowest[0]?.ratio ?? 0;
        expect(lowest, `${scheme}: ${JSON.stringify(report.lowest)}`).toBeGreaterThanOrEqual(7);
        console.log(`firefox ${scheme}: lowest text contrast ${lowest} over ${report.checked} elements`);
        expect(shownProblems).toEqual([]);
        await shown.close();
      }
    } finally {
      await dark.close();
    }
    expect(problems).toEqual([]);
  });
});
