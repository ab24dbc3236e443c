/**
 * Errors that clear themselves, and webhook storms that coalesce, against a GitSource served over
 * smart HTTP by the real `git http-backend`. A small HTTP proxy in front of it plays an outage (503
 * for every request while it is "down"); everything behind it is real.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../src/core/conditions.js';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const SECRET = 'recovery-webhook-secret';

/** Forwards to `target`, or answers 503 to everything while `down` is set. */
async function startFlakyProxy(
  target: string,
): Promise<{ url: string; down: boolean; close(): Promise<void> }> {
  const upstream = new URL(target);
  const state = { down: false };
  const server: Server = createServer((req, res) => {
    if (state.down) {
      req.resume();
      res.writeHead(503).end('down for the test');
      return;
    }
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

describe('a source recovers by itself and coalesces syncs', () => {
  let work: TestRepo;
  let root: string;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let proxy: Awaited<ReturnType<typeof startFlakyProxy>>;
  let system: TestSystem;
  let head: string;

  const ready = async () => (await system.sourceStatus())?.conditions?.find((c) => c.type === 'Ready');
  /** Waits, through polls alone, until the source's Ready condition matches. */
  const readyWhen = (what: string, matches: (c: Condition) => boolean) =>
    eventually(
      async () => {
        const r = await ready();
        return r && matches(r) ? r : undefined;
      },
      20_000,
      what,
    );
  const refListings = () =>
    server.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/info/refs'));
  /** One signed GitHub push delivery of `pushed`, with a delivery id of its own. */
  const deliver = (pushed: string) => {
    const body = JSON.stringify({ ref: 'refs/heads/main', after: pushed, repository: { full_name: 'o/r' } });
    return system.call('/v1/webhooks/default/test', {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
      },
    });
  };

  beforeAll(async () => {
    root = await tempDir('recovery-root');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    server = await startGitHttpServer(root);
    proxy = await startFlakyProxy(server.url);
    work = await TestRepo.create({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'first';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    head = await git(work.dir, 'rev-parse', 'HEAD');
    system = await startTestSystem({
      url: `${proxy.url}/fns.git`,
      interval: '1s',
      env: { SLESS_WEBHOOK_SECRET_DEFAULT__TEST: SECRET },
    });
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"first"',
      30_000,
      'first deploy',
    );
  });

  afterAll(async () => {
    await system?.close();
    await proxy?.close();
    await server?.close();
    await work?.remove();
  });

  it('a branch deleted and restored at the same commit recovers by polling alone', async () => {
    const bare = join(root, 'fns.git');
    await git(bare, 'update-ref', '-d', 'refs/heads/main');
    const gone = await readyWhen('BranchNotFound from a poll', (c) => c.reason === 'BranchNotFound');
    expect(gone.status).toBe('False');
    expect((await bodyOf(system, '/fn/default/hello')).text).toBe('"first"');
    await git(bare, 'update-ref', 'refs/heads/main', head);
    const back = await readyWhen('Ready again at the same commit', (c) => c.status === 'True');
    expect(back.reason).toBe('Synced');
    expect(back.message).toContain(`at ${head.slice(0, 12)}`);
    const status = await system.sourceStatus();
    expect(status?.phase).toBe('Ready');
    expect(status?.lastSyncedCommit).toBe(head);
    expect(status?.conditions?.map((c) => c.type)).toEqual(['Ready']);
  });

  it('a git server outage shows in status and clears once the server answers again', async () => {
    expect((await ready())?.status).toBe('True');
    proxy.down = true;
    const down = await readyWhen('the outage in status', (c) => c.status === 'False');
    expect(down.message).toMatch(/503/);
    expect((await bodyOf(system, '/fn/default/hello')).text).toBe('"first"');
    proxy.down = false;
    const back = await readyWhen('Ready after the outage', (c) => c.status === 'True');
    expect(back.reason).toBe('Synced');
    expect(back.observedGeneration).toBe(1);
  });

  it('100 webhook deliveries for one push cost a handful of syncs, not 100', async () => {
    await work.commit({ 'hello/handler.js': nodeHandler(`return 'stormed';`) });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const pushed = await git(work.dir, 'rev-parse', 'HEAD');
    const before = refListings().length;
    const answers = await Promise.all(Array.from({ length: 100 }, () => deliver(pushed)));
    for (const answer of answers)
      expect((await answer.json()) as unknown).toEqual({
        status: 'accepted',
        source: 'default/test',
      });
    // Joins the sync still waiting, if any, so once it resolves every webhook's sync has finished.
    const last = await system.controller.syncNow('default', 'test');
    expect(last?.commit).toBe(pushed);
    expect((await system.sourceStatus())?.lastSyncedCommit).toBe(pushed);
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"stormed"',
      20_000,
      'the pushed commit served',
    );
    const listings = refListings().length - before;
    console.log(`100 webhooks (+1 sync to wait on, plus 1 s polls meanwhile): ${listings} ref listings`);
    expect(listings).toBeGreaterThanOrEqual(1);
    expect(listings).toBeLessThanOrEqual(6);
  });

  it('100 webhook deliveries spread over 3 s cost about one sync a second, not one each', async () => {
    const pushed = await work.commit({ 'hello/handler.js': nodeHandler(`return 'spread';`) });
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const before = refListings().length;
    const started = Date.now();
    for (let i = 0; i < 100; i++) {
      const answer = await deliver(pushed);
      expect(answer.status).toBe(202);
      await answer.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    const spreadMs = Date.now() - started;
    // Joins the sync still waiting, if any: once it resolves, every delivery's sync has run.
    const last = await system.controller.syncNow('default', 'test');
    expect(last?.commit).toBe(pushed);
    await eventually(
      async () => (await bodyOf(system, '/fn/default/hello')).text === '"spread"',
      20_000,
      'the pushed commit served',
    );
    const listings = refListings().length - before;
    console.log(`100 webhooks over ${spreadMs} ms (1 s polls meanwhile): ${listings} ref listings`);
    // One sync per 1 s window (the polls join the same windows), one for the last window, and the
    // one that fetches the new commit lists the refs twice.
    expect(listings).toBeGreaterThanOrEqual(2);
    expect(listings).toBeLessThanOrEqual(Math.ceil(spreadMs / 1000) + 3);
  });
});
