/**
 * deploy/rbac.yaml is complete and least-privilege: the RBAC objects are applied for
 * real, then the whole controller runs impersonating its ServiceAccount (Impersonate-User, via the
 * kubeconfig) while watching ALL namespaces. Every operation it needs must be allowed (any 403 in its
 * logs fails the test), and writes it has no business doing are denied.
 *
 * No kubelet, Job controller or kaniko: the test, as admin, plays them (markBuildSucceeded,
 * markJobComplete).
 */
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreEvent } from '../../src/core/interfaces.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { KubeCodeVerdicts } from '../../src/platform/kube/code-verdicts.js';
import { KubeApiError, KubeHttp } from '../../src/platform/kube/http.js';
import { KubeNamespaces } from '../../src/platform/kube/namespaces.js';
import { apply, getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { PREPULL_NAME, PrepullKeeper, prepullDaemonSet } from '../../src/platform/kube/prepull.js';
import { ReplicaKey } from '../../src/platform/kube/replica-key.js';
import {
  CRONJOB,
  DAEMON_SET,
  DEPLOYMENT,
  JOB,
  NAMESPACE,
  SECRET,
  SERVICE,
  slessType,
} from '../../src/platform/kube/resource-types.js';
import { KubeScaler } from '../../src/platform/kube/scaler.js';
import {
  FUNCTIONS_POLICY_NAME,
  functionsNetworkPolicy,
  NETWORK_POLICY,
  PullSecretSync,
  type SecretObject,
} from '../../src/platform/kube/tenant.js';
import { MemoryStore } from '../../src/platform/local/memory-store.js';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { DEPLOY_DIR, loadKustomization, typeOf } from './deploy-manifests.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  markJobComplete,
  playHealthyKubelet,
  suffix,
} from './harness.js';

const SA = 'system:serviceaccount:sless-system:sless-controller';

let env: KubeEnv;
let asController: KubeHttp;
let saConfig: KubeConfig;
let stopKubelet: () => void;

beforeAll(async () => {
  // Its controller watches every namespace: on the shared cluster it would reconcile, and race over,
  // other test files' objects.
  env = await kubeEnv('rbac', { ownCluster: true });
  // Plays the Deployment controller and kubelet: every rollout succeeds; these tests are about RBAC.
  stopKubelet = playHealthyKubelet(env.http, env.ns);
  const objects = await loadKustomization(DEPLOY_DIR);
  for (const kind of ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'])
    for (const o of objects.filter((x) => x.kind === kind)) await apply(env.http, typeOf(o), o);
  // The leader-election and code-verdict Roles live in the controller namespace, which is this test's own.
  for (const kind of ['Role', 'RoleBinding'])
    for (const o of objects.filter((x) => x.kind === kind))
      await apply(env.http, typeOf(o), { ...o, metadata: { ...o.metadata, namespace: env.controllerNs } });
  const cluster = env.cluster.kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('no cluster');
  saConfig = new KubeConfig();
  saConfig.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'sa', token: env.cluster.adminToken, impersonateUser: SA }],
    contexts: [{ name: 'sa', cluster: cluster.name, user: 'sa' }],
    currentContext: 'sa',
  });
  asController = new KubeHttp(saConfig);
  // The RBAC authorizer picks the binding up within moments.
  await eventually('binding effective', async () => {
    await asController.request('GET', '/apis/sless.dev/v1alpha1/functions');
    return true;
  });
});
afterAll(async () => {
  stopKubelet?.();
  asController?.close();
  await env?.close();
});

async function denied(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (error) {
    if (error instanceof KubeApiError) return error.code;
    throw error;
  }
  return 200;
}

describe('RBAC of deploy/', () => {
  it('the controller, impersonating its ServiceAccount and watching all namespaces, can do everything it needs', async () => {
    const logs: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logs.push(chunk.toString());
          done();
        },
      }),
    );
    const root = await tempDir('kube-git-rbac');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    const token = `t-${suffix()}`;
    const server = await startGitHttpServer(root, { token });
    const work = await TestRepo.create({
      'rb/function.yaml': functionManifest('rb'),
      'rb/handler.js': nodeHandler(`return 1;`),
      'rb/more.yaml':
        'apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata: {name: rb-cron}\nspec: {type: cron, function: rb, schedule: "0 * * * *"}\n' +
        '---\napiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata: {name: once}\nspec: {function: rb, runId: 1}\n',
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const commit = await git(work.dir, 'rev-parse', 'HEAD');
    // The GitSource's credentials, as a user would put them next to it.
    await env.http.request('POST', `/api/v1/namespaces/${env.ns}/secrets`, {
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'git-token' },
        stringData: { token, webhookSecret: 'hook-secret' },
      },
    });
    const config = { ...env.config, watchNamespaces: undefined };
    let system: KubeSystem | undefined;
    try {
      system = await startKubeSystem(config, { logger, kubeConfig: saConfig, pollMs: 100 });
      await system.store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'GitSource',
        metadata: { name: 'repo', namespace: env.ns },
        spec: {
          url: `${server.url}/r.git`,
          branch: 'main',
          path: '.',
          interval: '1h',
          suspend: false,
          secretRef: { name: 'git-token' },
        },
      });
      const buildJob = await completeBuild(env, 'rb', commit, 'rb');
      await eventually('Deployment', () => getObject(env.http, DEPLOYMENT, env.ns, 'rb'));
      await eventually('Service', () => getObject(env.http, SERVICE, env.ns, 'rb'));
      await eventually(
        'Ready',
        async () => (await system?.store.get('Function', env.ns, 'rb'))?.status?.phase === 'Ready',
      );
      // Events were created as the ServiceAccount (rbac.yaml allows events/create).
      await eventually('Events as the ServiceAccount', async () => {
        const events = await env.http.request<{ items: { reason: string }[] }>(
          'GET',
          `/api/v1/namespaces/${env.ns}/events`,
          { query: { fieldSelector: 'involvedObject.kind=Function,involvedObject.name=rb' } },
        );
        return events.items.some((e) => e.reason === 'Serving');
      });
      await eventually('CronJob', () => getObject(env.http, CRONJOB, env.ns, 'trigger-rb-cron'));
      await eventually('run Job', () => getObject(env.http, JOB, env.ns, 'run-once-1'));
      await markJobComplete(env.http, env.ns, 'run-once-1');
      await eventually('FunctionJob done', async () => {
        const job = await system?.store.get('FunctionJob', env.ns, 'once');
        return job?.status?.phase === 'Succeeded';
      });
      // The deploy copied the pull secret into the function namespace, as the ServiceAccount.
      expect((await getObject<SecretObject>(env.http, SECRET, env.ns, 'sless-registry-pull'))?.data).toEqual({
        '.dockerconfigjson': env.registrySecrets.pull,
      });
      // Tenant namespaces through the API's ensure endpoint: Namespace, pull secret, NetworkPolicy.
      const tenant = `rbac-tenant-${suffix()}`;
      const ensure = await fetch(`${system.url}/v1/namespaces/${tenant}/ensure`, { method: 'POST' });
      expect(ensure.status).toBe(201);
      expect((await fetch(`${system.url}/v1/namespaces/${tenant}/ensure`, { method: 'POST' })).status).toBe(
        200,
      );
      expect(await getObject(env.http, NAMESPACE, undefined, tenant)).toBeDefined();
      expect((await getObject<SecretObject>(env.http, SECRET, tenant, 'sless-registry-pull'))?.data).toEqual({
        '.dockerconfigjson': env.registrySecrets.pull,
      });
      expect(await getObject(env.http, NETWORK_POLICY, tenant, FUNCTIONS_POLICY_NAME)).toBeDefined();
      // The same, directly through KubeNamespaces as the ServiceAccount.
      const other = `rbac-tenant-${suffix()}`;
      const namespaces = new KubeNamespaces({
        http: asController,
        controllerNamespace: env.controllerNs,
        pullSecrets: new PullSecretSync({
          http: asController,
          controllerNamespace: env.controllerNs,
          source: 'sless-registry-pull',
          name: 'sless-registry-pull',
        }),
      });
      expect(await namespaces.ensureNamespace(other)).toBe(true);
      expect(await namespaces.ensureNamespace(other)).toBe(false);
      expect(await getObject(env.http, SECRET, other, 'sless-registry-pull')).toBeDefined();
      expect(await getObject(env.http, NETWORK_POLICY, other, FUNCTIONS_POLICY_NAME)).toBeDefined();
      // Removing the function: prune, finalizer cleanup of build Jobs, workload deletion.
      await work.commit({ 'rb/function.yaml': null, 'rb/handler.js': null, 'rb/more.yaml': null });
      await git(work.dir, 'push', '--quiet', 'origin', 'main');
      // A signed GitHub push webhook triggers the sync; its secret comes from the GitSource's Secret.
      const payload = JSON.stringify({ ref: 'refs/heads/main' });
      const hook = await fetch(`${system.url}/v1/webhooks/${env.ns}/repo`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-hub-signature-256': `sha256=${createHmac('sha256', 'hook-secret').update(payload).digest('hex')}`,
        },
        body: payload,
      });
      expect(hook.status).toBe(202);
      expect(await hook.json()).toMatchObject({ status: 'accepted' });
      await eventually(
        'Function gone for good',
        async () => (await getObject(env.http, slessType('Function'), env.ns, 'rb')) === undefined,
      );
      await eventually(
        'build Job cleaned',
        async () => (await getObject(env.http, JOB, env.controllerNs, buildJob)) === undefined,
      );
      await eventually(
        'Deployment removed',
        async () => (await getObject(env.http, DEPLOYMENT, env.ns, 'rb')) === undefined,
      );
      // What a log line says, not its numbers: `"retryInMs":403` is no refusal. This controller
      // watches all namespaces, so it also logs about other test files' objects.
      const said = (line: string) => {
        const { msg, err } = JSON.parse(line) as { msg?: string; err?: string };
        return `${msg ?? ''} ${err ?? ''}`;
      };
      const forbidden = logs.filter((l) => /forbidden|\b403\b/i.test(said(l)));
      expect(forbidden, forbidden.join('\n')).toEqual([]);
    } finally {
      await system?.stop();
      await server.close();
      await work.remove();
    }
  });

  it('the controller can scale a function at zero, read its endpoints and keep code verdicts, as its ServiceAccount', async () => {
    await apply(env.http, DEPLOYMENT, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'sz', namespace: env.ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'sz' } },
        template: {
          metadata: { labels: { app: 'sz' } },
          spec: { containers: [{ name: 'c', image: 'x:1' }] },
        },
      },
    });
    const scaler = new KubeScaler({
      http: asController,
      store: new MemoryStore(),
      logger: pino({ level: 'silent' }),
    });
    expect(await scaler.readyEndpoint(env.ns, 'sz')).toBeUndefined();
    const fn = { metadata: { namespace: env.ns, name: 'sz' }, spec: {} } as SlessFunction;
    await expect(
      new KubeScaler({
        http: asController,
        store: new MemoryStore(),
        logger: pino({ level: 'silent' }),
        activationTimeoutMs: 1,
      }).activate(fn),
    ).rejects.toThrow(/did not start within/);
    expect(
      ((await getObject(env.http, DEPLOYMENT, env.ns, 'sz'))?.spec as { replicas?: number } | undefined)
        ?.replicas,
    ).toBe(1);
    const verdicts = new KubeCodeVerdicts({ http: asController, controllerNamespace: env.controllerNs });
    const verdict = {
      check: { result: 'Refused' as const, message: 'mines coins' },
      commit: 'c'.repeat(40),
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.000Z',
    };
    await verdicts.set('k'.repeat(32), verdict);
    expect(await verdicts.get('k'.repeat(32))).toEqual(verdict);
    // Verdicts live in the controller namespace only: a tenant's namespace takes none.
    expect(
      await denied(
        new KubeCodeVerdicts({ http: asController, controllerNamespace: env.ns }).set(
          't'.repeat(32),
          verdict,
        ),
      ),
    ).toBe(403);
    // A verdict is never overwritten, not even by the controller.
    await verdicts.set('k'.repeat(32), { ...verdict, check: { result: 'Passed', message: 'fine' } });
    expect(await verdicts.get('k'.repeat(32))).toEqual(verdict);
    // The replicas' key: two replicas that both find it missing make it at once, and hold one key.
    const replicaKey = (identity: string) =>
      new ReplicaKey({
        http: asController,
        logger: pino({ level: 'silent' }),
        namespace: env.controllerNs,
        name: 'sless-replica-key',
        identity,
      });
    const [one, two] = await Promise.all([replicaKey('replica-1').get(), replicaKey('replica-2').get()]);
    expect(one).toHaveLength(32);
    expect(two).toEqual(one);
    const stored = await getObject<SecretObject>(env.http, SECRET, env.controllerNs, 'sless-replica-key');
    expect(Buffer.from(stored?.data?.key ?? '', 'base64')).toEqual(one);
  });

  it('pre-pull: by default the controller may only delete its DaemonSet; with the component it keeps it as the runtimes in use change', async () => {
    const settings = { controllerNamespace: env.controllerNs };
    const daemonSets = `/apis/apps/v1/namespaces/${env.controllerNs}/daemonsets`;
    const prepull = prepullDaemonSet(settings, ['node:20.20.2-bookworm-slim']);
    const other = { ...prepull, metadata: { ...prepull.metadata, name: 'not-prepull' } };
    expect(await denied(apply(asController, DAEMON_SET, prepull))).toBe(403);
    expect(await denied(asController.request('GET', `${daemonSets}/${PREPULL_NAME}`))).toBe(403);
    // Allowed, and there is none: 404, not 403.
    expect(await denied(asController.request('DELETE', `${daemonSets}/${PREPULL_NAME}`))).toBe(404);
    expect(await denied(asController.request('DELETE', `${daemonSets}/not-prepull`))).toBe(403);

    for (const o of await loadKustomization(join(DEPLOY_DIR, 'components', 'prepull')))
      await apply(env.http, typeOf(o), { ...o, metadata: { ...o.metadata, namespace: env.controllerNs } });
    await eventually('the component binding effective', async () => {
      return (await denied(asController.request('GET', `${daemonSets}/${PREPULL_NAME}`))) === 404;
    });
    // The Functions the keeper reads, as the store's watch would tell them.
    const functions = new Map<string, SlessFunction>();
    const listeners = new Set<(event: StoreEvent) => void>();
    const setFunction = (name: string, runtime: SlessFunction['spec']['runtime'] | undefined) => {
      const fn = {
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: { name, namespace: env.ns },
        spec: { runtime, entrypoint: 'handler.handle' },
      } as SlessFunction;
      if (runtime) functions.set(name, fn);
      else functions.delete(name);
      for (const listener of listeners)
        listener({ type: runtime ? 'MODIFIED' : 'DELETED', object: fn, statusOnly: false });
    };
    const lines: string[] = [];
    let looks = 0;
    const keeper = new PrepullKeeper({
      http: asController,
      logger: pino(
        { level: 'info' },
        new Writable({ write: (c, _e, done) => done(void lines.push(String(c))) }),
      ),
      enabled: true,
      settings,
      functions: {
        // The store's watches have not listed yet on the first look, as at a leader's start.
        cached: (_kind, keep) => {
          if (looks++ === 0) return undefined;
          for (const fn of functions.values()) keep(fn);
          return [];
        },
        subscribe: (listener) => {
          listeners.add(listener);
          return () => listeners.delete(listener);
        },
      },
    });
    const images = async () => {
      const ds = await getObject<KubeObject>(env.http, DAEMON_SET, env.controllerNs, PREPULL_NAME);
      const spec = ds?.spec as { template: { spec: { initContainers: { image: string }[] } } } | undefined;
      return spec?.template.spec.initContainers.map((c) => c.image);
    };
    setFunction('a', 'nodejs20');
    keeper.start();
    try {
      await eventually('the DaemonSet applied', async () => (await images())?.length === 2);
      expect((await images())?.slice(1)).toEqual(['node:20.20.2-bookworm-slim']);
      setFunction('b', 'python3.11');
      await eventually('python pulled too', async () => (await images())?.length === 3);
      expect((await images())?.slice(1)).toEqual([
        'node:20.20.2-bookworm-slim',
        'python:3.11.13-slim-bookworm',
      ]);
      setFunction('a', undefined);
      setFunction('b', undefined);
      await eventually(
        'no runtime in use: the DaemonSet deleted',
        async () => (await images()) === undefined,
      );
    } finally {
      await keeper.stop();
    }
    expect(lines.join('')).not.toMatch(/not kept/);
    // Still only its own: another DaemonSet may not be changed or deleted.
    expect(await denied(asController.request('DELETE', `${daemonSets}/not-prepull`))).toBe(403);
    await apply(env.http, DAEMON_SET, other);
    expect(
      await denied(
        apply(asController, DAEMON_SET, { ...other, metadata: { ...other.metadata, labels: {} } }),
      ),
    ).toBe(403);
  });

  it('denies what the controller must never do', async () => {
    const secret = () => ({
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: `x-${suffix()}` }, stringData: { a: 'b' } },
    });
    expect(await denied(asController.request('DELETE', `/api/v1/namespaces/${env.ns}`))).toBe(403);
    expect(await denied(asController.request('POST', '/api/v1/namespaces/default/secrets', secret()))).toBe(
      403,
    );
    expect(await denied(asController.request('POST', `/api/v1/namespaces/${env.ns}/secrets`, secret()))).toBe(
      403,
    );
    expect(
      await denied(asController.request('POST', `/api/v1/namespaces/${env.controllerNs}/secrets`, secret())),
    ).toBe(403);
    // Secrets are read (functions' references are checked and hashed, and watched to roll on a
    // rotation), never written but the pull-secret copy.
    expect(await denied(asController.request('GET', `/api/v1/namespaces/${env.ns}/secrets`))).toBe(200);
    expect(await denied(asController.request('GET', '/api/v1/secrets'))).toBe(200);
    // Secret writes only by the pull-secret copy's name: never the push secret, never another name.
    const applied = (namespace: string, name: string) =>
      apply(asController, SECRET, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace },
        stringData: { a: 'b' },
      });
    expect(await denied(applied(env.controllerNs, 'sless-registry-push'))).toBe(403);
    // resourceNames cannot restrict a plain create (it carries no name), so a plain create is denied.
    expect(
      await denied(
        asController.request('POST', `/api/v1/namespaces/${env.ns}/secrets`, {
          body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'sless-registry-pull' } },
        }),
      ),
    ).toBe(403);
    expect(await denied(applied(env.ns, 'sless-registry-push'))).toBe(403);
    // The replicas' key by its name, in the controller namespace only.
    expect(await denied(applied(env.ns, 'sless-replica-key'))).toBe(403);
    expect(await denied(applied(env.controllerNs, `x-${suffix()}`))).toBe(403);
    expect(await denied(applied(env.ns, `x-${suffix()}`))).toBe(403);
    expect(
      await denied(
        asController.request('DELETE', `/api/v1/namespaces/${env.ns}/secrets/sless-registry-pull`),
      ),
    ).toBe(403);
    // Leases: only its own, and only in its own namespace.
    const leases = (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
    expect(await denied(asController.request('GET', `${leases(env.controllerNs)}/kube-scheduler`))).toBe(403);
    expect(await denied(asController.request('GET', leases(env.controllerNs)))).toBe(403);
    expect(
      await denied(
        asController.request('POST', leases(env.ns), {
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: 'sless-controller' },
          },
        }),
      ),
    ).toBe(403);
    // NetworkPolicies: only `sless-functions`, and never deleted.
    const policy = (name: string) =>
      apply(asController, NETWORK_POLICY, {
        ...functionsNetworkPolicy(env.ns, env.controllerNs),
        metadata: { name, namespace: env.ns },
      });
    expect(await denied(policy(`x-${suffix()}`))).toBe(403);
    expect(
      await denied(
        asController.request('GET', `/apis/networking.k8s.io/v1/namespaces/${env.ns}/networkpolicies`),
      ),
    ).toBe(403);
    expect(
      await denied(
        asController.request(
          'DELETE',
          `/apis/networking.k8s.io/v1/namespaces/${env.ns}/networkpolicies/${FUNCTIONS_POLICY_NAME}`,
        ),
      ),
    ).toBe(403);
    expect(
      await denied(
        asController.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
          body: {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'p' },
            spec: { containers: [{ name: 'c', image: 'x:1' }] },
          },
        }),
      ),
    ).toBe(403);
    expect(
      await denied(
        asController.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
          body: {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRoleBinding',
            metadata: { name: 'escalate' },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
            subjects: [{ kind: 'ServiceAccount', name: 'sless-controller', namespace: 'sless-system' }],
          },
        }),
      ),
    ).toBe(403);
    expect(
      await denied(
        asController.request(
          'DELETE',
          '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/functions.sless.dev',
        ),
      ),
    ).toBe(403);
    expect(
      await denied(
        asController.request('DELETE', `/api/v1/namespaces/${env.ns}/configmaps/kube-root-ca.crt`),
      ),
    ).toBe(403);
  });
});
