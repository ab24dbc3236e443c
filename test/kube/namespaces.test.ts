/**
 * `POST /v1/namespaces/{ns}/ensure` on kube, against the real API server: the Namespace, a copy of the
 * pull-only registry secret (never the push secret), and the `sless-functions` NetworkPolicy, all
 * idempotent; exactly one 201 under concurrency; a rotated source propagates on the next ensure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { KubeHttp } from '../../src/platform/kube/http.js';
import { KubeNamespaces } from '../../src/platform/kube/namespaces.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { NAMESPACE, SECRET } from '../../src/platform/kube/resource-types.js';
import {
  FUNCTIONS_POLICY_NAME,
  functionsNetworkPolicy,
  NETWORK_POLICY,
  PullSecretError,
  PullSecretSync,
  type SecretObject,
} from '../../src/platform/kube/tenant.js';
import { startApiProxy } from './api-proxy.js';
import {
  dockerConfigJson,
  type KubeEnv,
  kubeEnv,
  logger,
  putRegistrySecret,
  restorePullSecret,
  suffix,
} from './harness.js';

let env: KubeEnv;
let system: KubeSystem;

beforeAll(async () => {
  env = await kubeEnv('nsens');
  system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
});
afterAll(async () => {
  await system?.stop();
  await env?.close();
});

const ensure = (ns: string) => fetch(`${system.url}/v1/namespaces/${ns}/ensure`, { method: 'POST' });
const pullCopy = (ns: string) => getObject<SecretObject>(env.http, SECRET, ns, 'sless-registry-pull');

describe('kube: ensure a tenant namespace', () => {
  it('201 then 200; creates the Namespace, the pull secret copy and the NetworkPolicy', async () => {
    const ns = `tenant-${suffix()}`;
    const first = await ensure(ns);
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ namespace: ns, created: true });
    const second = await ensure(ns);
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual({ namespace: ns, created: false });

    const namespace = await getObject(env.http, NAMESPACE, undefined, ns);
    expect(namespace?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'sless',
      'sless.dev/tenant': 'true',
    });

    const secret = await pullCopy(ns);
    expect(secret?.type).toBe('kubernetes.io/dockerconfigjson');
    expect(secret?.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'sless' });
    // The same bytes as the pull-only source, and nothing of the push secret.
    expect(secret?.data).toEqual({ '.dockerconfigjson': env.registrySecrets.pull });
    expect(env.registrySecrets.pull).not.toBe(env.registrySecrets.push);
    expect(JSON.stringify(secret)).not.toContain(env.registrySecrets.push);
    expect(await getObject(env.http, SECRET, ns, 'sless-registry-push')).toBeUndefined();
    const managers = (secret?.metadata.managedFields ?? []) as { manager?: string; operation?: string }[];
    expect(managers.map((m) => [m.manager, m.operation])).toEqual([['sless-controller', 'Apply']]);

    const policy = await getObject<KubeObject>(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME);
    // The exact spec is pinned in tenant.test.ts; here: the API server stores what was applied.
    expect(policy?.spec).toEqual(functionsNetworkPolicy(ns, env.controllerNs).spec);
    expect(JSON.stringify(policy?.spec)).toContain(`"kubernetes.io/metadata.name":"${env.controllerNs}"`);
  });

  it('10 concurrent ensures of a new namespace: exactly one 201, all succeed', async () => {
    const ns = `tenant-${suffix()}`;
    const answers = await Promise.all(Array.from({ length: 10 }, () => ensure(ns)));
    const codes = answers.map((a) => a.status).sort();
    expect(codes).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect((await pullCopy(ns))?.data).toEqual({ '.dockerconfigjson': env.registrySecrets.pull });
    expect(await getObject(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME)).toBeDefined();
  });

  it('an existing namespace (not created by sless) gets the pull secret and the policy too', async () => {
    const ns = `tenant-${suffix()}`;
    await env.http.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    expect((await ensure(ns)).status).toBe(200);
    expect((await pullCopy(ns))?.data).toEqual({ '.dockerconfigjson': env.registrySecrets.pull });
    expect(await getObject(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME)).toBeDefined();
  });

  it('a rotated source pull secret reaches the copy on the next ensure', async () => {
    const ns = `tenant-${suffix()}`;
    expect((await ensure(ns)).status).toBe(201);
    const before = (await pullCopy(ns))?.data?.['.dockerconfigjson'];
    const host = env.cluster.registry.url.replace(/^https?:\/\//, '');
    const rotated = dockerConfigJson(host, 'puller', `rotated-${suffix()}`);
    await putRegistrySecret(env.http, env.controllerNs, 'sless-registry-pull', rotated);
    try {
      expect((await ensure(ns)).status).toBe(200);
      const after = (await pullCopy(ns))?.data?.['.dockerconfigjson'];
      expect(after).not.toBe(before);
      expect(after).toBe(Buffer.from(rotated).toString('base64'));
    } finally {
      await restorePullSecret(env);
    }
  });

  it('fails loudly when the source pull secret is missing or not a dockerconfigjson', async () => {
    const missing = new KubeNamespaces({
      http: env.http,
      controllerNamespace: env.controllerNs,
      pullSecrets: new PullSecretSync({
        http: env.http,
        controllerNamespace: env.controllerNs,
        source: 'no-such-secret',
        name: 'sless-registry-pull',
      }),
    });
    await expect(missing.ensureNamespace(`tenant-${suffix()}`)).rejects.toThrow(PullSecretError);
    await expect(missing.ensureNamespace(`tenant-${suffix()}`)).rejects.toThrow(
      /no-such-secret does not exist/,
    );
    await env.http.request('POST', `/api/v1/namespaces/${env.controllerNs}/secrets`, {
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'opaque' }, stringData: { a: 'b' } },
    });
    const opaque = new PullSecretSync({
      http: env.http,
      controllerNamespace: env.controllerNs,
      source: 'opaque',
      name: 'sless-registry-pull',
    });
    await expect(opaque.ensure(env.ns)).rejects.toThrow(/not a kubernetes.io\/dockerconfigjson/);
  });

  it('without a pull secret configured: Namespace and NetworkPolicy only', async () => {
    const ns = `tenant-${suffix()}`;
    const namespaces = new KubeNamespaces({ http: env.http, controllerNamespace: env.controllerNs });
    expect(await namespaces.ensureNamespace(ns)).toBe(true);
    expect(await namespaces.ensureNamespace(ns)).toBe(false);
    expect(await pullCopy(ns)).toBeUndefined();
    expect(await getObject(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME)).toBeDefined();
  });

  it('30 deploys preparing one namespace at once cost two preparations; an opened policy is taken back by the next', async () => {
    const ns = `tenant-${suffix()}`;
    const proxy = await startApiProxy(env.cluster.apiServerUrl, env.cluster.caCert, env.cluster.adminToken);
    try {
      const http = new KubeHttp(proxy.kubeConfig);
      const namespaces = new KubeNamespaces({
        http,
        controllerNamespace: env.controllerNs,
        pullSecrets: new PullSecretSync({
          http,
          controllerNamespace: env.controllerNs,
          source: 'sless-registry-pull',
          name: 'sless-registry-pull',
        }),
      });
      expect(await namespaces.ensureNamespace(ns)).toBe(true);
      const policyWrites = () =>
        proxy.requests.filter((r) => r.startsWith('PATCH ') && r.includes('/networkpolicies/')).length;
      const secretReads = () =>
        proxy.requests.filter((r) => r.startsWith('GET ') && r.includes('/secrets/sless-registry-pull'))
          .length;
      const [writesBefore, readsBefore] = [policyWrites(), secretReads()];
      await Promise.all(Array.from({ length: 30 }, () => namespaces.prepare(ns)));
      expect(policyWrites() - writesBefore).toBe(2);
      expect(secretReads() - readsBefore).toBe(2);

      // Someone opens the tenant boundary: the next preparation, even one asked while another runs,
      // puts the controller's policy back.
      await env.http.request(
        'PATCH',
        `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies/${FUNCTIONS_POLICY_NAME}`,
        {
          body: { spec: { ingress: [{}] } },
          contentType: 'application/merge-patch+json',
        },
      );
      const opened = await getObject<KubeObject>(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME);
      expect(opened?.spec).not.toEqual(functionsNetworkPolicy(ns, env.controllerNs).spec);
      await Promise.all([namespaces.prepare(ns), namespaces.prepare(ns)]);
      const policy = await getObject<KubeObject>(env.http, NETWORK_POLICY, ns, FUNCTIONS_POLICY_NAME);
      expect(policy?.spec).toEqual(functionsNetworkPolicy(ns, env.controllerNs).spec);
    } finally {
      await proxy.close();
    }
  });
});
