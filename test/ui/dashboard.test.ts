/**
 * The dashboard in a real headless Chromium against the real `sless dev` serving examples-repo/, as
 * a newcomer's `npm start` does: the five examples Ready, a commit that changes the serving commit
 * on the open page (no reload), a broken manifest's reason, a pin from the build history and the
 * unpin, followed logs, a keyboard-driven action, and every figure on a card held to the API answer
 * the test reads itself.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildRecord, GitSource, SlessFunction } from '../../src/core/resources.js';
import { ago, duration, short } from '../../ui/src/format.js';
import { launchBrowser, screenshot, textOf, waitForText, watchPage } from '../helpers/browser.js';
import { CONTRAST_SCRIPT, type ContrastReport } from '../helpers/contrast.js';
import { type ExamplesDev, startExamplesDev } from '../helpers/examples-dev.js';
import { git } from '../helpers/git.js';
import { pollUntil } from '../helpers/poll-until.js';
import type { SlessProcess } from '../helpers/sless-process.js';

const NS = '/v1/namespaces/default';
const EXAMPLES = ['hello-go', 'hello-node', 'hello-python', 'ticks-node', 'time-node'];
const card = (kind: string, name: string) => `[data-kind="${kind}"][data-name="${name}"]`;
const fnField = (name: string, field: string) => `${card('Function', name)} [data-field="${field}"]`;
const sourceField = (field: string) => `${card('GitSource', 'examples')} [data-field="${field}"]`;

describe('the dashboard on sless dev', { timeout: 5 * 60_000 }, () => {
  let sless: SlessProcess;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  let dev: ExamplesDev | undefined;
  let repo: string;
  const commits: string[] = [];

  const api = async <T>(path: string): Promise<T> => {
    const response = await sless.call(path);
    expect(response.status, `${path}: ${await response.clone().text()}`).toBe(200);
    return (await response.json()) as T;
  };
  const fn = (name: string) => api<SlessFunction>(`${NS}/functions/${name}`);
  const commit = async (path: string, content: string, message: string) => {
    await writeFile(join(repo, path), content);
    await git(repo, 'commit', '--quiet', '-am', message);
    const sha = await git(repo, 'rev-parse', 'HEAD');
    commits.push(sha);
    return sha;
  };

  beforeAll(async () => {
    dev = await startExamplesDev('ui-dashboard');
    ({ sless, repo } = dev);
    commits.push(await git(repo, 'rev-parse', 'HEAD'));
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    problems = watchPage(page);
  }, 4 * 60_000);

  afterAll(async () => {
    await browser?.close();
    await dev?.close();
  });

  it('`sless dev` prints the dashboard URL, and the page shows the five examples Ready', async () => {
    await sless.settled();
    expect(sless.printed).toContain(`  dashboard: ${sless.url.replace('127.0.0.1', 'localhost')}/ui/`);
    await page.goto(`${sless.url}/ui/`);
    await waitForText(page, '#live', (t) => t === 'live', 'the event stream is live');
    for (const name of EXAMPLES)
      await waitForText(page, fnField(name, 'phase'), (t) => t === 'Ready', `${name} Ready`, 4 * 60_000);
    expect(await page.locator('[data-kind="Function"]').count()).toBe(EXAMPLES.length);
    await screenshot(page, 'dashboard-examples-ready');
  });

  it('shows on each card exactly what the API answers', async () => {
    const source = await api<GitSource>(`${NS}/sources/examples`);
    const { items } = await api<{ items: SlessFunction[] }>(`${NS}/functions`);
    // The page may lag its own events by a frame; it must come to the API's figures.
    await waitForText(page, sourceField('head'), (t) => t === short(source.status?.lastSyncedCommit), 'head');
    expect(await textOf(page, sourceField('headMessage'))).toBe(source.status?.lastSyncedMessage);
    expect(source.status?.lastSyncedMessage).toBe('Examples from sless');
    expect(await textOf(page, sourceField('url'))).toBe(source.spec.url);
    expect(await textOf(page, sourceField('branch'))).toBe(source.spec.branch);
    expect(await textOf(page, sourceField('ready'))).toBe('Ready · Synced');
    for (const fnObject of items) {
      const name = fnObject.metadata.name;
      const status = fnObject.status ?? {};
      expect(await textOf(page, fnField(name, 'phase'))).toBe(status.phase);
      expect(await textOf(page, fnField(name, 'commit'))).toBe(short(status.commit));
      expect(await textOf(page, fnField(name, 'servingCommit'))).toBe(short(status.servingCommit));
      expect(await textOf(page, fnField(name, 'url'))).toBe(status.url);
      // The instances the platform observed (status.instances), as `kubectl get functions` shows them.
      if (status.phase === 'Ready')
        expect(await textOf(page, fnField(name, 'instances'))).toBe(String(status.instances?.ready));
      expect(await textOf(page, fnField(name, 'lastBuildDuration'))).toBe(
        duration(status.lastBuild?.durationMs),
      );
      expect(await textOf(page, fnField(name, 'lastBuild'))).toBe(
        `${status.lastBuild?.result} at ${short(status.lastBuild?.commit)}`,
      );
      const { items: builds } = await api<{ items: BuildRecord[] }>(`${NS}/functions/${name}/builds`);
      const rows = page.locator(`${fnField(name, 'history')} tbody tr`);
      await pollUntil(`${name} history rows`, async () => (await rows.count()) === builds.length, 10_000, 50);
      for (const [index, build] of builds.entries()) {
        expect(await rows.nth(index).getAttribute('data-commit')).toBe(build.commit);
        expect((await rows.nth(index).locator('td').nth(3).textContent())?.trim()).toBe(
          duration(build.durationMs),
        );
      }
    }
    // The trigger's next run moves every minute: the page must show the run the API names then.
    const nextRun = page.locator(`${card('Trigger', 'hello-every-minute')} [data-field="nextRun"]`);
    await pollUntil(
      'the next run the API names',
      async () => {
        const trigger = await api<{ status?: { nextRun?: string } }>(`${NS}/triggers/hello-every-minute`);
        return (
          trigger.status?.nextRun !== undefined &&
          (await nextRun.getAttribute('title')) === trigger.status.nextRun
        );
      },
      10_000,
      50,
    );
    const job = await api<{ status?: { phase?: string; exitCode?: number } }>(`${NS}/jobs/hello-once`);
    expect(job.status?.phase).toBe('Succeeded');
    await waitForText(
      page,
      `${card('FunctionJob', 'hello-once')} [data-field="phase"]`,
      (t) => t === 'Succeeded',
      'job',
    );
    expect(await textOf(page, `${card('FunctionJob', 'hello-once')} [data-field="exitCode"]`)).toBe(
      String(job.status?.exitCode),
    );
    expect(ago(undefined)).toBe('—');
  });

  it('a commit changes the serving commit on the open page, pushed by the server (no reload)', async () => {
    // A mark on the page's global object: a reload would lose it.
    await page.evaluate(() => {
      (globalThis as { notReloaded?: boolean }).notReloaded = true;
    });
    const changes = async () => Number((await page.locator('body').getAttribute('data-changes')) ?? '0');
    const before = await changes();
    const handler = join(repo, 'functions/hello-node/handler.js');
    const code = (await readFile(handler, 'utf8')).replace(
      'export async function handle(event, context) {',
      "export async function handle(event, context) {\n  console.log('dashboard-test says', event.query?.say ?? '');",
    );
    const sha = await commit('functions/hello-node/handler.js', code, 'hello-node logs what it is told');
    await waitForText(
      page,
      fnField('hello-node', 'servingCommit'),
      (t) => t === short(sha),
      'new serving commit',
    );
    await waitForText(
      page,
      sourceField('headMessage'),
      (t) => t === 'hello-node logs what it is told',
      'message',
    );
    expect((await fn('hello-node')).status?.servingCommit).toBe(sha);
    // A function the commit did not touch keeps serving its build of the first commit.
    expect(await textOf(page, fnField('hello-go', 'servingCommit'))).toBe(short(commits[0]));
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    expect(await changes()).toBeGreaterThan(before);
  });

  it('a broken manifest shows its file and reason on the source, and the last good commit still serves', async () => {
    const manifest = join(repo, 'functions/hello-node/function.yaml');
    const good = await readFile(manifest, 'utf8');
    const serving = commits.at(-1);
    await commit(
      'functions/hello-node/function.yaml',
      good.replace('memoryMb: 128', 'memoryMb: 99999'),
      'too much',
    );
    const message = await waitForText(
      page,
      sourceField('readyMessage'),
      (t) => t.includes('rejected'),
      'reason',
    );
    expect(message).toContain('functions/hello-node/function.yaml');
    expect(message).toContain('spec.memoryMb');
    expect(await textOf(page, sourceField('ready'))).toBe('Not ready · ValidationFailed');
    expect(await textOf(page, fnField('hello-node', 'servingCommit'))).toBe(short(serving));
    await screenshot(page, 'dashboard-broken-manifest');
    await commit('functions/hello-node/function.yaml', good, 'fixed');
    await waitForText(page, sourceField('ready'), (t) => t === 'Ready · Synced', 'fixed');
  });

  it('pins the source to a commit from the build history, and unpins it', async () => {
    const logged = commits[1] as string;
    const history = page.locator(`${card('Function', 'hello-node')} [data-details="history"]`);
    await history.locator('summary').click();
    const pinFirst = history.locator(`button[data-action="pin"][data-commit="${commits[0]}"]`);
    await pinFirst.click();
    await waitForText(page, sourceField('pinned'), (t) => t === short(commits[0]), 'pinned');
    await waitForText(
      page,
      fnField('hello-node', 'servingCommit'),
      (t) => t === short(commits[0]),
      'rolled back',
    );
    const pinned = await api<GitSource>(`${NS}/sources/examples`);
    expect(pinned.spec.ref?.commit).toBe(commits[0]);
    // The history stays open across the updates that the pin caused.
    expect(await history.getAttribute('open')).not.toBeNull();
    await screenshot(page, 'dashboard-pinned');
    await page.locator(`${card('GitSource', 'examples')} button[data-action="unpin"]`).click();
    await waitForText(page, fnField('hello-node', 'servingCommit'), (t) => t === short(logged), 'unpinned');
    expect(await page.locator(sourceField('pinned')).count()).toBe(0);
    expect((await api<GitSource>(`${NS}/sources/examples`)).spec.ref?.commit).toBeUndefined();
  });

  it('follows a function’s logs as it is called', async () => {
    await page.locator(`${card('Function', 'hello-node')} button[data-action="logs"]`).click();
    await waitForText(page, '#logs-fn', (t) => t.includes('following'), 'following');
    for (const word of ['first', 'second']) {
      expect((await sless.call(`/fn/default/hello-node?say=${word}`)).status).toBe(200);
      await waitForText(
        page,
        '#logs-out',
        (t) => t.includes(`dashboard-test says ${word}`),
        `log line ${word}`,
      );
    }
    await screenshot(page, 'dashboard-logs');
    await page.locator('#logs-stop').click();
    await waitForText(page, '#logs-fn', (t) => t.includes('stopped'), 'stopped');
    expect((await sless.call('/fn/default/hello-node?say=third')).status).toBe(200);
    // The stopped view shows nothing more; the API has the line.
    await pollUntil(
      'the third line in the API',
      async () =>
        (await (await sless.call(`${NS}/functions/hello-node/logs?tail=5`)).text()).includes('third'),
      10_000,
      50,
    );
    expect(await textOf(page, '#logs-out')).not.toContain('dashboard-test says third');
  });

  it('keeps text contrast at 7:1 or more in the light and the dark scheme', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      // The scheme took effect: the page's background is the scheme's own.
      expect(await page.evaluate('getComputedStyle(document.body).backgroundColor'), scheme).toBe(
        scheme === 'light' ? 'rgb(246, 247, 249)' : 'rgb(18, 20, 24)',
      );
      const report = (await page.evaluate(CONTRAST_SCRIPT)) as ContrastReport;
      expect(report.checked, scheme).toBeGreaterThan(50);
      const lowest = report.lowest[0]?.ratio ?? 0;
      expect(lowest, `${scheme}: ${JSON.stringify(report.lowest)}`).toBeGreaterThanOrEqual(7);
      console.log(`chromium ${scheme}: lowest text contrast ${lowest} over ${report.checked} elements`);
    }
    await page.emulateMedia({ colorScheme: null });
  });

  it('is usable from the keyboard: Tab to "Sync now", Enter, and the outcome is announced', async () => {
    await page.locator('#notice').evaluate((box) => {
      box.textContent = '';
    });
    // What has focus, read in the page (its DOM types are not this file's).
    type Doc = {
      document: { activeElement: { getAttribute(name: string): string | null; blur?(): void } | null };
    };
    const action = () =>
      page.evaluate(
        () => (globalThis as unknown as Doc).document.activeElement?.getAttribute('data-action') ?? '',
      );
    await page.evaluate(() => (globalThis as unknown as Doc).document.activeElement?.blur?.());
    let focused = '';
    for (let presses = 0; presses < 20 && focused !== 'sync'; presses++) {
      await page.keyboard.press('Tab');
      focused = await action();
    }
    expect(focused).toBe('sync');
    await page.keyboard.press('Enter');
    await waitForText(page, '#notice', (t) => t.startsWith('Sync of examples done'), 'sync outcome');
    expect(await page.locator('#notice').getAttribute('role')).toBe('alert');
    expect(problems).toEqual([]);
  });
});
