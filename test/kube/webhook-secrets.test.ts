/**
 * Where the kube platform finds a source's webhook secret, against a real kube-apiserver: the
 * `webhookSecret` key of the GitSource's secretRef Secret, else the controller-wide settings
 * (SLESS_WEBHOOK_SECRET_<SOURCE>, then SLESS_WEBHOOK_SECRET), as the docs say. GitSources live in
 * the in-memory store here: only the Secrets matter to the lookup.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitSource } from '../../src/core/resources.js';
import { kubeWebhookSecrets } from '../../src/platform/kube/webhook-secrets.js';
import { MemoryStore } from '../../src/platform/local/memory-store.js';
import { gitSource } from '../helpers/git.js';
import { type KubeEnv, kubeEnv } from './harness.js';

describe('kube webhook secrets', () => {
  let env: KubeEnv;
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
  });

  afterAll(async () => {
    await env?.close();
  });

  it("uses the secretRef Secret's webhookSecret, else the per-source setting, else the global one", async () => {
    const lookup = kubeWebhookSecrets({
      http: env.http,
      store,
      fallback: { global: 'global-secret', perSource: { MY_REPO: 'repo-secret' } },
    });
    expect(await lookup(env.ns, 'own')).toBe('per-tenant-secret');
    expect(await lookup(env.ns, 'creds-only')).toBe('global-secret');
    expect(await lookup(env.ns, 'missing-secret')).toBe('global-secret');
    expect(await lookup(env.ns, 'plain')).toBe('global-secret');
    expect(await lookup(env.ns, 'my-repo')).toBe('repo-secret');
    // No settings at all: no secret, which the webhook route answers with 403.
    const none = kubeWebhookSecrets({
      http: env.http,
      store,
      fallback: { global: undefined, perSource: {} },
    });
    expect(await none(env.ns, 'plain')).toBeUndefined();
    expect(await none(env.ns, 'own')).toBe('per-tenant-secret');
  });
});
