/**
 * A GitSource's secretRef on kube, against a real kube-apiserver and `git http-backend`.
 *
 * Git credentials: the Secret's `username` + `password` (or `token`, user x-access-token).
 *
 * Webhook secrets: the
 * `webhookSecret` key of the GitSource's secretRef Secret, else the controller-wide settings
 * (SLESS_WEBHOOK_SECRET_<SOURCE>, then SLESS_WEBHOOK_SECRET), as the docs say. GitSources live in
 * the in-memory store here: only the Secrets matter to the lookup.
 */
import { join } from 'node:path';
import http from 'isomorphic-git/http/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SourceError } from '../../src/core/errors.js';
import { scopedEnvSuffix } from '../../src/core/naming.js';
import type { GitSource } from '../../src/core/resources.js';
import { KubeSourceReaderFactory } from '../../src/platform/kube/source-readers.js';
import { kubeWebhookSecrets } from '../../src/platform/kube/webhook-secrets.js';
import { MemoryStore } from '../../src/platform/local/memory-store.js';
import { git, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { type KubeEnv, kubeEnv } from './harness.js';

describe('kube GitSource secrets', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let head: string;
  const store = new MemoryStore();

  const secret = (name: string, stringData: Record<string, string>) =>
    env.http.request('POST', `/api/v1/namespaces/${env.ns}/secrets`, {
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData },
    });
  const source = (name: string, secretRef?: string): GitSource => {
    const base = gitSource(name, env.ns, 'https://git.example.com/r.git');
    return { ...base, spec: { ...base.spec, ...(secretRef ? { secretRef: { name: secretRef } } : {}) } };
  };

  beforeAll(async () => {
    env = await kubeEnv('hooks');
    await secret('with-hook', { token: 't', webhookSecret: 'per-tenant-secret' });
    await secret('token-only', { token: 't' });
    await store.ensureNamespace(env.ns);
    await store.apply(source('own', 'with-hook'));
    await store.apply(source('creds-only', 'token-only'));
    await store.apply(source('missing-secret', 'no-such-secret'));
    await store.apply(source('plain'));
    await store.apply(source('my-repo'));
    const root = await tempDir('kube-creds');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    work = await TestRepo.create({ 'a.txt': 'a\n' });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    head = await git(work.dir, 'rev-parse', 'HEAD');
    server = await startGitHttpServer(root, { username: 'deploy', token: 'pw-7c1e' });
    await secret('basic', { username: 'deploy', password: 'pw-7c1e' });
    await secret('wrong-user', { token: 'pw-7c1e' });
    await secret('empty', { note: 'no credentials here' });
  });

  afterAll(async () => {
    await server?.close();
    await work?.remove();
    await env?.close();
  });

  it('reads git credentials from the Secret: username + password open the repository', async () => {
    // isomorphic-git's node client stands in for the outbound-policy one, which refuses loopback.
    const factory = new KubeSourceReaderFactory({
      http: env.http,
      stateDir: await tempDir('kube-creds-state'),
      gitHttp: http,
    });
    const remote = (secretRef?: string) => {
      const s = source('r', secretRef);
      return { ...s, spec: { ...s.spec, url: `${server.url}/r.git` } };
    };
    const reader = await factory.create(remote('basic'));
    expect(await reader.resolveHead()).toBe(head);
    expect((await (await reader.snapshot(head)).listFiles('')).map((f) => f.path)).toEqual(['a.txt']);
    // A token alone goes as x-access-token, which this server refuses: the username above mattered.
    const tokenOnly = await factory.create(remote('wrong-user'));
    expect(await tokenOnly.resolveHead().catch((e: unknown) => e)).toBeInstanceOf(SourceError);
    const invalid = await factory.create(remote('empty')).catch((e: unknown) => e);
    expect((invalid as SourceError).message).toBe('secretRef "empty": needs a "password" or "token" key');
    const missing = await factory.create(remote('nope')).catch((e: unknown) => e);
    expect((missing as SourceError).message).toBe(`secretRef "nope": no such secret in ${env.ns}`);
  });

  it("uses the secretRef Secret's webhookSecret, else SLESS_WEBHOOK_SECRET_<NS>__<SOURCE> of that namespace only", async () => {
    const own = scopedEnvSuffix(env.ns, 'my-repo') as string;
    const lookup = kubeWebhookSecrets({
      http: env.http,
      store,
      fallback: { perSource: { [own]: 'repo-secret', OTHER__PLAIN: 'not-this-namespace' } },
    });
    expect(own).toBe(`${env.ns.toUpperCase().replace(/[^A-Z0-9]/g, '_')}__MY_REPO`);
    expect(await lookup(env.ns, 'own')).toBe('per-tenant-secret');
    expect(await lookup(env.ns, 'my-repo')).toBe('repo-secret');
    // A Secret without webhookSecret, a missing Secret and no secretRef: the setting, here none (403).
    expect(await lookup(env.ns, 'creds-only')).toBeUndefined();
    expect(await lookup(env.ns, 'missing-secret')).toBeUndefined();
    expect(await lookup(env.ns, 'plain')).toBeUndefined();
    const withSettings = kubeWebhookSecrets({
      http: env.http,
      store,
      fallback: {
        perSource: {
          [scopedEnvSuffix(env.ns, 'creds-only') as string]: 'c',
          [scopedEnvSuffix(env.ns, 'missing-secret') as string]: 'm',
        },
      },
    });
    expect(await withSettings(env.ns, 'creds-only')).toBe('c');
    expect(await withSettings(env.ns, 'missing-secret')).toBe('m');
    expect(await withSettings(env.ns, 'own')).toBe('per-tenant-secret');
  });
});
