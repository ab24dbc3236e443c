/**
 * What the README says of remote sources in local mode, against the real `git http-backend`:
 * a `secretRef: {name: x}` in namespace `ns` reads SLESS_SECRET_<NS>__<X>_TOKEN, and a new head is
 * fetched shallow (depth 1) and for one branch only. isomorphic-git's own node client stands in for
 * the outbound-policy client, which refuses loopback addresses such as this test server's.
 */
import { join } from 'node:path';
import http from 'isomorphic-git/http/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SourceError } from '../../src/core/errors.js';
import type { GitSource } from '../../src/core/resources.js';
import { LocalSourceReaderFactory } from '../../src/platform/local/source-readers.js';
import { git, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';

const TOKEN = 'tok-3f9a';
const ENV = 'SLESS_SECRET_DEFAULT__GIT_CREDS_TOKEN';

describe('remote sources in local mode', () => {
  let root: string;
  let work: TestRepo;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let open: Awaited<ReturnType<typeof startGitHttpServer>>;
  let main: string;
  let other: string;

  beforeAll(async () => {
    root = await tempDir('git-creds');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    work = await TestRepo.create({ 'a.txt': 'one\n' });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await work.commit({ 'a.txt': 'two\n' });
    main = await git(work.dir, 'rev-parse', 'HEAD');
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    // Another branch whose head is not on main: a single-branch fetch never asks for it.
    await git(work.dir, 'checkout', '--quiet', '-b', 'other');
    await work.commit({ 'b.txt': 'elsewhere\n' });
    other = await git(work.dir, 'rev-parse', 'HEAD');
    await git(work.dir, 'push', '--quiet', 'origin', 'other');
    server = await startGitHttpServer(root, { token: TOKEN });
    open = await startGitHttpServer(root);
  });

  afterAll(async () => {
    await server?.close();
    await open?.close();
    await work?.remove();
  });

  const source = (url: string, secret?: string): GitSource => ({
    ...gitSource('r', 'default', url),
    spec: { ...gitSource('r', 'default', url).spec, ...(secret ? { secretRef: { name: secret } } : {}) },
  });

  it('a secretRef reads SLESS_SECRET_<NS>__<NAME>_TOKEN and authenticates the fetch', async () => {
    const factory = new LocalSourceReaderFactory({
      stateDir: await tempDir('creds-state'),
      http,
      env: { [ENV]: TOKEN },
    });
    const reader = await factory.create(source(`${server.url}/r.git`, 'git-creds'));
    expect(await reader.resolveHead()).toBe(main);
    const snapshot = await reader.snapshot(main);
    expect((await snapshot.listFiles('')).map((f) => f.path)).toEqual(['a.txt']);
  });

  it('without the variable the source fails with a message naming it; a wrong token is refused', async () => {
    const unset = new LocalSourceReaderFactory({ stateDir: await tempDir('creds-state'), http, env: {} });
    const missing = await unset.create(source(`${server.url}/r.git`, 'git-creds')).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(SourceError);
    expect((missing as Error).message).toBe('secretRef "git-creds": no such secret in default');
    // Another namespace's variable of the same name is not this source's secret.
    const elsewhere = new LocalSourceReaderFactory({
      stateDir: await tempDir('creds-state'),
      http,
      env: { SLESS_SECRET_OTHER__GIT_CREDS_TOKEN: TOKEN },
    });
    expect(
      await elsewhere.create(source(`${server.url}/r.git`, 'git-creds')).catch((e: unknown) => e),
    ).toBeInstanceOf(SourceError);
    const factory = new LocalSourceReaderFactory({
      stateDir: await tempDir('creds-state'),
      http,
      env: { [ENV]: 'wrong' },
    });
    const reader = await factory.create(source(`${server.url}/r.git`, 'git-creds'));
    const refused = await reader.resolveHead().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SourceError);
    expect((refused as Error).message).toContain('401');
    // And without any secretRef, the protected server refuses too: the token above is what opened it.
    const anonymous = await factory.create(source(`${server.url}/r.git`));
    expect(await anonymous.resolveHead().catch((e: unknown) => e)).toBeInstanceOf(SourceError);
  });

  it('an empty token or password is no secret: the same "no such secret" as an unset one', async () => {
    for (const env of [
      { [ENV]: '' },
      { SLESS_SECRET_DEFAULT__GIT_CREDS_USERNAME: 'u', SLESS_SECRET_DEFAULT__GIT_CREDS_PASSWORD: '' },
    ]) {
      const factory = new LocalSourceReaderFactory({ stateDir: await tempDir('creds-state'), http, env });
      const refused = await factory
        .create(source(`${server.url}/r.git`, 'git-creds'))
        .catch((e: unknown) => e);
      expect(refused, JSON.stringify(env)).toBeInstanceOf(SourceError);
      expect((refused as Error).message).toBe('secretRef "git-creds": no such secret in default');
    }
  });

  it('fetches a new head shallow (depth 1) and for its branch only', async () => {
    const factory = new LocalSourceReaderFactory({ stateDir: await tempDir('shallow-state'), http });
    const reader = await factory.create(source(`${open.url}/r.git`));
    const before = open.requests.length;
    await reader.snapshot(await reader.resolveHead());
    const negotiations = open.requests.slice(before).filter((r) => r.wantsObjects);
    expect(negotiations.length).toBeGreaterThan(0);
    expect(negotiations.flatMap((r) => r.wants)).not.toContain(other);
    expect(new Set(negotiations.flatMap((r) => r.wants))).toEqual(new Set([main]));
    expect(negotiations.map((r) => r.deepen)).toEqual(negotiations.map(() => 1));
  });

  it("one namespace's fetch with its secret is not another namespace's: same URL, separate git caches", async () => {
    const stateDir = await tempDir('ns-cache-state');
    const factory = new LocalSourceReaderFactory({
      stateDir,
      http,
      env: { SLESS_SECRET_TEAM_A__GIT_CREDS_TOKEN: TOKEN, SLESS_SECRET_TEAM_B__GIT_CREDS_TOKEN: 'wrong' },
    });
    const inNamespace = (namespace: string): GitSource => {
      const base = gitSource('r', namespace, `${server.url}/r.git`);
      return { ...base, spec: { ...base.spec, secretRef: { name: 'git-creds' } } };
    };
    const a = await factory.create(inNamespace('team-a'));
    expect(await a.resolveHead()).toBe(main);
    expect((await (await a.snapshot(main)).listFiles('')).map((f) => f.path)).toEqual(['a.txt']);
    // team-b names the same URL with a wrong token: the commit team-a fetched is not in its cache, so
    // reading it means fetching with team-b's own credentials, which the server refuses.
    const b = await factory.create(inNamespace('team-b'));
    const refused = await b.snapshot(main).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SourceError);
    expect((refused as Error).message).toContain('401');
  });
});
