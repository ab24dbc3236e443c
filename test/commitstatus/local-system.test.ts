/**
 * Deploy status on the commit from the real local system: a source with `spec.commitStatus` gets
 * `pending` and then `success` with the function's URL on the commit that a real sync built and
 * served, `failure` naming the file on a commit whose manifest is rejected, and a host that is down
 * while a commit deploys holds nothing up: the commit serves at once, and its status arrives once
 * the host is back. The git server and the status API both take the source's one token.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { RecordingServer } from '../helpers/recording-server.js';

const TOKEN = 'status-token-7c1e';
let system: TestSystem;
let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
let host: RecordingServer;
let work: TestRepo;

interface Posted {
  path: string;
  state: string;
  description: string;
  target_url?: string;
}

const posted = (): Posted[] =>
  host.requests.map((r) => ({ path: r.path, ...(r.body as Omit<Posted, 'path'>) }));
const postedFor = (sha: string) => posted().filter((p) => p.path === `/api/repos/acme/site/statuses/${sha}`);

async function push(files: Record<string, string>, message: string): Promise<string> {
  const sha = await work.commit(files, message);
  await git(work.dir, 'push', '--quiet', 'origin', 'main');
  const synced = await system.call('/v1/namespaces/default/sources/site/sync', { method: 'POST' });
  expect(synced.status).toBe(200);
  return sha;
}

beforeAll(async () => {
  const root = await tempDir('commit-status-git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'acme/site.git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'empty.git');
  gitServer = await startGitHttpServer(root, { token: TOKEN });
  host = await RecordingServer.start();
  work = await TestRepo.create({ 'README.md': 'site\n' });
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'acme/site.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');
  system = await startTestSystem({
    url: `${gitServer.url}/empty.git`,
    env: { SLESS_SECRET_DEFAULT__CREDS_TOKEN: TOKEN },
  });
  const registered = await system.call('/v1/namespaces/default/sources', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'site',
      spec: {
        url: `${gitServer.url}/acme/site.git`,
        secretRef: { name: 'creds' },
        interval: '1h',
        commitStatus: { provider: 'github', apiUrl: `${host.url}/api` },
      },
    }),
  });
  expect(registered.status).toBe(201);
});

afterAll(async () => {
  await system?.close();
  await gitServer?.close();
  await host?.stop();
  await work?.remove();
});

describe('spec.commitStatus on the local system', () => {
  test('pending while the function builds, success with its URL once it serves', async () => {
    const sha = await push(
      { 'web/function.yaml': functionManifest('web'), 'web/handler.js': nodeHandler("return 'v1';") },
      'web v1',
    );
    await eventually(async () => postedFor(sha).some((p) => p.state === 'success'), 60_000, 'success');
    const states = postedFor(sha).map((p) => p.state);
    expect(states[0]).toBe('pending');
    expect(states.at(-1)).toBe('success');
    const served = (await (await system.call('/v1/namespaces/default/functions/web')).json()) as {
      status: { url: string };
    };
    expect(served.status.url).toMatch(/\/fn\/default\/web$/);
    expect(postedFor(sha).at(-1)).toMatchObject({
      description: 'web serving',
      target_url: served.status.url,
      context: 'sless',
    });
    expect(host.requests.every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(await (await system.call('/fn/default/web')).json()).toBe('v1');
  });

  test('a host that is down holds no deploy up; the status arrives once it is back', async () => {
    await host.stop();
    const before = host.requests.length;
    const sha = await push({ 'web/handler.js': nodeHandler("return 'v2';") }, 'web v2');
    await eventually(
      async () => (await (await system.call('/fn/default/web')).json()) === 'v2',
      60_000,
      'v2 serves',
    );
    expect(host.requests.length).toBe(before);
    await host.listen();
    await eventually(async () => postedFor(sha).some((p) => p.state === 'success'), 60_000, 'late success');
  });

  test('a rejected manifest is a failure naming the file and the field', async () => {
    const sha = await push({ 'web/function.yaml': functionManifest('web', { memoryMb: 99999 }) }, 'too big');
    await eventually(async () => postedFor(sha).some((p) => p.state === 'failure'), 30_000, 'failure');
    const failure = postedFor(sha).find((p) => p.state === 'failure');
    expect(failure?.description).toContain('web/function.yaml');
    expect(failure?.description).toContain('spec.memoryMb');
    // What served keeps serving.
    expect(await (await system.call('/fn/default/web')).json()).toBe('v2');
  });
});
