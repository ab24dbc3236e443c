/**
 * The dashboard with auth on, in a real headless Chromium against the real local system (JWTs from
 * a JWKS server, each tenant's source built and served in the sandbox): the page asks for a token,
 * refuses a bad one, takes one from its fragment and removes it from the address bar, and a tenant
 * sees its own namespace and nothing of another's, not even when that one changes meanwhile.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { pino } from 'pino';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLocalConfig } from '../../src/config/config.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { type LocalSystem, startLocalSystem } from '../../src/main.js';
import { launchBrowser, screenshot, textOf, waitForText, watchPage } from '../helpers/browser.js';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { TEST_BUILD_CACHE } from '../helpers/local-system.js';
import { pollUntil } from '../helpers/poll-until.js';
import { SseReader } from '../helpers/sse.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'sless';
// sless- + sha256(sub)[0:16], as the authenticator derives them.
const ALICE_NS = 'sless-2bd806c97f0e00af';
const BOB_NS = 'sless-81b637d8fcd2c6da';

describe('the dashboard with auth on', { timeout: 4 * 60_000 }, () => {
  let jwks: Server;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: LocalSystem;
  let browser: Browser;
  let stateDir: string;
  const repos: Record<string, TestRepo> = {};
  const tokens: Record<string, string> = {};

  const api = (token: string, path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(`${system.url}${path}`, { ...init, headers });
  };
  const functionOf = async (tenant: string, ns: string, name: string) =>
    (await (
      await api(tokens[tenant] as string, `/v1/namespaces/${ns}/functions/${name}`)
    ).json()) as SlessFunction;

  beforeAll(async () => {
    const key = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(key.publicKey)), kid: 'k1', alg: 'ES256' };
    jwks = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    for (const sub of ['alice', 'bob'])
      tokens[sub] = await new SignJWT({ sub })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('10m')
        .sign(key.privateKey);

    const root = await tempDir('ui-tenants-git');
    gitServer = await startGitHttpServer(root);
    for (const [tenant, fn] of [
      ['alice', 'alpha-fn'],
      ['bob', 'bravo-fn'],
    ] as const) {
      await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', `${tenant}.git`);
      const repo = await TestRepo.create({
        [`${fn}/function.yaml`]: functionManifest(fn),
        [`${fn}/handler.js`]: nodeHandler(`return '${tenant}';`),
      });
      await git(repo.dir, 'remote', 'add', 'origin', join(root, `${tenant}.git`));
      await git(repo.dir, 'push', '--quiet', 'origin', 'main');
      repos[tenant] = repo;
    }

    stateDir = await tempDir('ui-tenants-state');
    const config = loadLocalConfig(
      { port: '0', 'state-dir': stateDir, interval: '1h', 'build-cache-dir': TEST_BUILD_CACHE },
      {
        SLESS_AUTH_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
        SLESS_AUTH_ISSUER: ISSUER,
        SLESS_AUTH_AUDIENCE: AUDIENCE,
        SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
      },
    );
    system = await startLocalSystem(config, {
      logger: pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' }),
    });
    for (const [tenant, ns, source] of [
      ['alice', ALICE_NS, 'alpha-src'],
      ['bob', BOB_NS, 'bravo-src'],
    ] as const) {
      const token = tokens[tenant] as string;
      expect((await api(token, `/v1/namespaces/${ns}/ensure`, { method: 'POST' })).status).toBe(201);
      const registered = await api(token, `/v1/namespaces/${ns}/sources`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: source, spec: { url: `${gitServer.url}/${tenant}.git` } }),
      });
      expect(registered.status).toBe(201);
    }
    await pollUntil(
      'both tenants serve',
      async () =>
        (await functionOf('alice', ALICE_NS, 'alpha-fn')).status?.phase === 'Ready' &&
        (await functionOf('bob', BOB_NS, 'bravo-fn')).status?.phase === 'Ready',
      120_000,
      100,
    );
    browser = await launchBrowser();
  }, 3 * 60_000);

  afterAll(async () => {
    await browser?.close();
    await system?.stop();
    await gitServer?.close();
    await new Promise((resolve) => jwks?.close(resolve));
    for (const repo of Object.values(repos)) await repo.remove();
  });

  async function newPage(): Promise<{ page: Page; problems: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    return { page, problems: watchPage(page) };
  }

  it('asks for a token, refuses a bad one, and shows the tenant its namespace after a good one', async () => {
    const { page } = await newPage();
    await page.goto(`${system.url}/ui/`);
    await page.locator('#login').waitFor({ state: 'visible' });
    expect(await page.locator('#sources').isHidden()).toBe(true);
    await page.locator('#token').fill('not-a-token');
    await page.locator('#token').press('Enter');
    await waitForText(page, '#notice', (t) => t.startsWith('Sign-in failed'), 'refused');
    expect(await page.locator('#login').isVisible()).toBe(true);
    await page.locator('#token').fill(tokens.alice as string);
    await page.locator('#token').press('Enter');
    await waitForText(
      page,
      '[data-kind="Function"][data-name="alpha-fn"] [data-field="phase"]',
      (t) => t === 'Ready',
      'alpha',
    );
    expect(await page.locator('#login').isHidden()).toBe(true);
    // The token stays with the tab (sessionStorage), never in localStorage.
    expect(
      await page.evaluate(
        () => (globalThis as unknown as { localStorage: { length: number } }).localStorage.length,
      ),
    ).toBe(0);
    await page.close();
  });

  it('tenant A, signed in through the fragment, sees nothing of tenant B, even as B changes', async () => {
    const { page, problems } = await newPage();
    await page.goto(`${system.url}/ui/#token=${tokens.alice}`);
    await waitForText(page, '#live', (t) => t === 'live', 'live');
    await waitForText(
      page,
      '[data-kind="GitSource"][data-name="alpha-src"] [data-field="ready"]',
      (t) => t.startsWith('Ready'),
      'source',
    );
    // The token left the address bar (and the history entry) at once.
    expect(new URL(page.url()).hash).toBe('');
    expect(await textOf(page, '#who')).toBe(`alice · namespace ${ALICE_NS}`);
    expect(await page.locator('#ns-picker').isHidden()).toBe(true);
    expect(await page.locator('#ns option').allTextContents()).toEqual([ALICE_NS]);

    const changesBefore = Number((await page.locator('body').getAttribute('data-changes')) ?? '0');
    // Alice's feed as the page reads it, read here too: every event it carries is kept.
    const feed = await SseReader.open(`${system.url}/v1/namespaces/${ALICE_NS}/events`, {
      authorization: `Bearer ${tokens.alice}`,
    });
    await feed.next('hello', (e) => e.event === 'hello');
    // Bob commits; his function is rebuilt and served; Alice's page must learn nothing of it.
    await repos.bob?.commit({ 'bravo-fn/handler.js': nodeHandler(`return 'bob again';`) }, 'bob again');
    await git(repos.bob?.dir as string, 'push', '--quiet', 'origin', 'main');
    const bobSync = await api(tokens.bob as string, `/v1/namespaces/${BOB_NS}/sources/bravo-src/sync`, {
      method: 'POST',
    });
    expect(bobSync.status).toBe(200);
    const head = await git(repos.bob?.dir as string, 'rev-parse', 'HEAD');
    await pollUntil(
      'bob serves his new commit',
      async () => (await functionOf('bob', BOB_NS, 'bravo-fn')).status?.servingCommit === head,
      60_000,
      100,
    );
    // Alice syncs too: her page receives that change, so it was listening all along.
    await page.locator('[data-kind="GitSource"][data-name="alpha-src"] button[data-action="sync"]').click();
    await waitForText(page, '#notice', (t) => t.startsWith('Sync of alpha-src done'), 'alice synced');
    await pollUntil(
      'alice’s own change event',
      async () => Number((await page.locator('body').getAttribute('data-changes')) ?? '0') > changesBefore,
      10_000,
      50,
    );
    await feed.next('alice’s sync', (e) => (e.data as { name?: string }).name === 'alpha-src');
    feed.close();
    // Bob's rebuild (a build event and his objects' writes) reached neither the feed nor the page.
    expect(JSON.stringify(feed.events)).not.toContain('bravo');
    expect(JSON.stringify(feed.events)).not.toContain(BOB_NS);
    const shown = (await page.locator('body').textContent()) ?? '';
    for (const foreign of ['bravo', BOB_NS, 'bob']) expect(shown).not.toContain(foreign);
    await screenshot(page, 'dashboard-tenant-alice');

    // The page's own credentials cannot reach Bob's namespace either: the API refuses them.
    const refused = await page.evaluate(async (ns) => {
      const token = (
        globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }
      ).sessionStorage.getItem('sless-token');
      const answers = [];
      for (const path of [`/v1/namespaces/${ns}/events`, `/v1/namespaces/${ns}/functions`])
        answers.push((await fetch(path, { headers: { authorization: `Bearer ${token}` } })).status);
      return answers;
    }, BOB_NS);
    expect(refused).toEqual([403, 403]);
    expect(problems.filter((p) => !p.includes('403'))).toEqual([]);
    await page.close();
  });
});
