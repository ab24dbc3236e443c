/**
 * What a tenant can make sless do with its settings, replayed against the real local server: a
 * secretRef into another namespace, source URLs aimed at loopback (SSRF) or redirected, a webhook signed for
 * another namespace, and the small limits (interval, branch, timezone, event size and depth).
 */
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import {
  postJson,
  type RecordingServer,
  registerSource,
  sourceFailure,
  startRecordingServer,
} from './helpers.js';

const OPS_TOKEN = 'operator-only-token-value';
const HOOK_SECRET = 'default-test-hook-secret';
const basicFor = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;

let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
let work: TestRepo;
let tenantServer: RecordingServer;
/** 127.0.0.1 allowed by the admin (SLESS_OUTBOUND_ALLOW), as the tests' git server needs. */
let allowed: TestSystem;
/** The default policy: no private or loopback address is reachable from a tenant URL. */
let strict: TestSystem;

beforeAll(async () => {
  const root = await tempDir('sec-git-root');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  gitServer = await startGitHttpServer(root);
  work = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return 'hi';`),
  });
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');
  tenantServer = await startRecordingServer({ status: 401 });
  allowed = await startTestSystem({
    url: `${gitServer.url}/fns.git`,
    env: {
      SLESS_SECRET_DEFAULT__OPS_TOKEN: OPS_TOKEN,
      SLESS_WEBHOOK_SECRET_DEFAULT__TEST: HOOK_SECRET,
      SLESS_QUOTA_SOURCES: '3',
    },
  });
  strict = await startTestSystem({ url: `${gitServer.url}/fns.git`, env: { SLESS_OUTBOUND_ALLOW: '' } });
  await eventually(
    async () => (await bodyOf(allowed, '/fn/default/hello')).text === '"hi"',
    30_000,
    'deploy',
  );
}, 60_000);

afterAll(async () => {
  await allowed?.close();
  await strict?.close();
  await gitServer?.close();
  await tenantServer?.close();
  await work?.remove();
});

describe('row 2: secretRef resolves only in the source’s own namespace', () => {
  test("another namespace's secretRef to the operator's secret sends nothing and names nothing", async () => {
    await registerSource(allowed, 'tenant-b', 'steal', {
      url: `${tenantServer.url}/steal.git`,
      secretRef: { name: 'ops' },
    });
    const failure = await sourceFailure(allowed, 'tenant-b', 'steal');
    expect(failure.message).toBe('secretRef "ops": no such secret in tenant-b');
    // A name that exists nowhere gets the very same words: names cannot be probed.
    await registerSource(allowed, 'tenant-b', 'probe', {
      url: `${tenantServer.url}/probe.git`,
      secretRef: { name: 'nothing-here' },
    });
    expect((await sourceFailure(allowed, 'tenant-b', 'probe')).message).toBe(
      'secretRef "nothing-here": no such secret in tenant-b',
    );
    const sent = tenantServer.requests.filter((r) => r.path.startsWith('/steal.git'));
    expect(sent).toEqual([]);
  });

  test('the same secretRef in its own namespace is sent (the control: the secret works)', async () => {
    await registerSource(allowed, 'default', 'own', {
      url: `${tenantServer.url}/own.git`,
      secretRef: { name: 'ops' },
    });
    await sourceFailure(allowed, 'default', 'own'); // the recording server always answers 401
    const sent = tenantServer.requests.filter((r) => r.path.startsWith('/own.git'));
    expect(sent.map((r) => r.headers.authorization)).toContain(basicFor(OPS_TOKEN));
  });
});

describe('row 3: source URLs never reach loopback, private or metadata addresses', () => {
  test("sless's own /metrics through a source URL: refused before connecting, nothing copied", async () => {
    const port = new URL(strict.url).port;
    await registerSource(strict, 'default', 'metrics', { url: `http://127.0.0.1:${port}/metrics?` });
    const failure = await sourceFailure(strict, 'default', 'metrics');
    expect(failure.reason).toBe('SourceUnreachable');
    expect(failure.message).toContain('127.0.0.1 is a loopback address');
    expect(failure.message).not.toContain('sless_');
  });

  test('a name that resolves to loopback is refused after resolution (localhost, [::1])', async () => {
    const before = tenantServer.requests.length;
    await registerSource(strict, 'default', 'by-name', {
      url: `http://localhost:${tenantServer.port}/x.git`,
    });
    expect((await sourceFailure(strict, 'default', 'by-name')).message).toContain(
      'localhost is a loopback address',
    );
    await registerSource(strict, 'default', 'v6', { url: `http://[::1]:${tenantServer.port}/x.git` });
    expect((await sourceFailure(strict, 'default', 'v6')).message).toContain('is a loopback address');
    await registerSource(strict, 'default', 'meta', { url: 'http://169.254.169.254/latest/meta-data/' });
    expect((await sourceFailure(strict, 'default', 'meta')).message).toContain('link-local or metadata');
    await registerSource(strict, 'default', 'lan', { url: 'http://10.1.2.3/x.git' });
    expect((await sourceFailure(strict, 'default', 'lan')).message).toContain('a private address');
    expect(tenantServer.requests.length).toBe(before);
  });

  test('an open and a closed port give the same answer', async () => {
    const closed = await startRecordingServer();
    const closedPort = closed.port;
    await closed.close();
    await registerSource(strict, 'default', 'open', { url: `http://127.0.0.1:${tenantServer.port}/x.git` });
    await registerSource(strict, 'default', 'closed', { url: `http://127.0.0.1:${closedPort}/x.git` });
    const open = await sourceFailure(strict, 'default', 'open');
    const shut = await sourceFailure(strict, 'default', 'closed');
    expect(open.message.replaceAll(String(tenantServer.port), 'P')).toBe(
      shut.message.replaceAll(String(closedPort), 'P'),
    );
  });

  test('a redirect is not followed, even to an address the admin allowed: the source says the status only', async () => {
    const target = await startRecordingServer({ status: 200, body: 'REDIRECT-TARGET-BODY\n' });
    const redirecting = createServer((request, response) => {
      response.writeHead(302, { location: `${target.url}${request.url ?? '/'}` });
      response.end('REDIRECT-PAGE-BODY');
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/moved.git`;
      // In a namespace of its own: default's sources count towards the quota test below.
      await registerSource(allowed, 'tenant-r', 'moved', { url });
      const failure = await sourceFailure(allowed, 'tenant-r', 'moved');
      expect(failure.message).toBe(`cannot list refs of ${url}: HTTP 302`);
      expect(target.requests).toEqual([]);
    } finally {
      redirecting.closeAllConnections();
      await new Promise((resolve) => redirecting.close(resolve));
      await target.close();
    }
  });

  test("where an admin allowed the range, the server's answer still never reaches status", async () => {
    const leaky = await startRecordingServer({ status: 200, body: 'TOP-SECRET-BODY sless_metric 1\n' });
    try {
      await registerSource(allowed, 'default', 'leaky', { url: `${leaky.url}/x.git` });
      const failure = await sourceFailure(allowed, 'default', 'leaky');
      expect(leaky.requests.length).toBeGreaterThan(0);
      expect(failure.message).not.toContain('TOP-SECRET');
      expect(failure.message).toContain('did not answer as a git smart HTTP server');
    } finally {
      await leaky.close();
    }
  });
});

describe('row 6: a webhook secret signs for one namespace and source only', () => {
  const signedPost = (system: TestSystem, path: string) => {
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    return system.call(path, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-hub-signature-256': `sha256=${createHmac('sha256', HOOK_SECRET).update(body).digest('hex')}`,
      },
    });
  };

  test('signed for default/test, delivered to tenant-b/test: 403; to default/test: 202', async () => {
    await registerSource(allowed, 'tenant-b', 'test', { url: `${gitServer.url}/fns.git` });
    const elsewhere = await signedPost(allowed, '/v1/webhooks/tenant-b/test');
    expect(elsewhere.status).toBe(403);
    expect(((await elsewhere.json()) as { error: string }).error).toContain('no secret');
    expect((await signedPost(allowed, '/v1/webhooks/default/test')).status).toBe(202);
  });
});

describe('quotas and the smaller findings: each a clear 4xx', () => {
  const expect400 = async (path: string, body: unknown, field: string) => {
    const response = await postJson(allowed, path, body);
    const text = await response.text();
    expect(response.status, text).toBe(400);
    expect((JSON.parse(text) as { error: string }).error).toContain(field);
  };

  test('source interval: 0ms and a huge value are refused', async () => {
    for (const interval of ['0ms', '999ms', '99999999999999999999h'])
      await expect400(
        '/v1/namespaces/default/sources',
        { name: 'fast', spec: { url: `${gitServer.url}/fns.git`, interval } },
        'spec.interval: must be between 1s and 168h',
      );
  });

  test('a branch git would not accept is refused', async () => {
    for (const branch of ['../../HEAD\n', 'a..b', 'x.lock', '-rf', 'a b'])
      await expect400(
        '/v1/namespaces/default/sources',
        { name: 'branchy', spec: { url: `${gitServer.url}/fns.git`, branch } },
        'spec.branch: is not a valid git branch name',
      );
  });

  test('a trigger timezone must be an IANA name', async () => {
    const trigger = (timezone: string) => ({
      name: 'tz',
      spec: { type: 'cron', function: 'hello', schedule: '* * * * *', timezone },
    });
    await expect400('/v1/namespaces/default/triggers', trigger('../../../etc/passwd'), 'spec.timezone');
    const { name, spec } = trigger('Europe/Berlin');
    const ok = await postJson(allowed, '/v1/namespaces/default/validate', {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name },
      spec,
    });
    expect(ok.status, await ok.text()).toBe(200);
  });

  test('events: 128 KB is refused by size, 3,000 levels by depth, on /validate, /triggers and /jobs', async () => {
    let deep: unknown = {};
    for (let i = 0; i < 3000; i++) deep = { a: deep };
    const big = { blob: 'x'.repeat(128 * 1024) };
    const job = (event: unknown) => ({ name: 'j', spec: { function: 'hello', event, runId: 1 } });
    const trigger = (event: unknown) => ({ name: 't', spec: { type: 'http', function: 'hello', event } });
    await expect400('/v1/namespaces/default/jobs', job(big), 'spec.event: is larger than 32768 bytes');
    await expect400('/v1/namespaces/default/jobs', job(deep), 'is nested deeper than 32 levels');
    await expect400('/v1/namespaces/default/triggers', trigger(deep), 'is nested deeper than 32 levels');
    await expect400(
      '/v1/namespaces/default/validate',
      {
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'FunctionJob',
        metadata: { name: 'j' },
        spec: job(deep).spec,
      },
      'is nested deeper than 32 levels',
    );
  });

  test('sources per namespace: past the quota a clear 403', async () => {
    const spec = { url: `${gitServer.url}/fns.git`, suspend: true };
    await allowed.call('/v1/namespaces/quota-ns/ensure', { method: 'POST' });
    for (const name of ['q1', 'q2', 'q3'])
      expect((await postJson(allowed, '/v1/namespaces/quota-ns/sources', { name, spec })).status).toBe(201);
    const over = await postJson(allowed, '/v1/namespaces/quota-ns/sources', { name: 'q4', spec });
    expect(over.status).toBe(403);
    expect(((await over.json()) as { error: string }).error).toBe(
      'quota: namespace quota-ns already has 3 of its 3 GitSources',
    );
    // Updating one it already has is not a new source.
    expect((await postJson(allowed, '/v1/namespaces/quota-ns/sources', { name: 'q1', spec })).status).toBe(
      200,
    );
  });
});
