/**
 * `/fn/{ns}/{name}@{commit}` on kube against a real kube-apiserver + etcd, S3 and a git server: an old
 * commit's kept build serves its own body from a Deployment of its own, created on the first request;
 * the commit that serves now is the plain route; a plain call never reaches a commit revision's pod;
 * at most three run per function (the least recently used goes); the leader deletes one once idle,
 * also after a restart; and once deleted its build can be collected, after which the URL answers 404
 * with the local platform's words. A disabled function's revisions go.
 *
 * There is no kubelet, Deployment or EndpointSlice controller here: playHealthyKubelet marks
 * Deployments available, and PlayedPods below plays one pod per running Deployment (a local HTTP
 * server answering with that Deployment's name and image) and the EndpointSlice controller, which
 * lists a Service's pods by its selector, as the real one does.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { noKeptBuildMessage } from '../../src/core/revision-ref.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { commitDeploymentName } from '../../src/platform/kube/commit-manifests.js';
import { apply, getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import {
  collectionPath,
  DEPLOYMENT,
  ENDPOINT_SLICE,
  JOB,
  labelSelector,
  SERVICE,
} from '../../src/platform/kube/resource-types.js';
import { watchCollection } from '../../src/platform/kube/watch.js';
import { afterPasses } from '../helpers/after-ticks.js';
import { functionManifest, git, gitSource, nodeHandler } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  completeBuild,
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
} from './harness.js';

interface PlayedPod {
  address: string;
  image: string;
  server: Server;
  port: number;
  labels: Record<string, string>;
}

const imageOf = (d: KubeObject) =>
  (d.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]
    ?.image ?? '';

/** Plays the kubelet (a pod per running Deployment) and the EndpointSlice controller (by selector). */
class PlayedPods {
  private readonly pods = new Map<string, PlayedPod>();
  private readonly byAddress = new Map<string, PlayedPod>();
  private readonly slices = new Map<string, string>();
  private next = 1;
  private stopped = false;

  constructor(private readonly env: KubeEnv) {
    void (async () => {
      while (!this.stopped) {
        await this.sync().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
  }

  originOf(address: string): string {
    // An address no pod plays: a port nothing listens on, so such a request fails loudly.
    return `http://127.0.0.1:${this.byAddress.get(address)?.port ?? 1}`;
  }

  stop(): void {
    this.stopped = true;
    for (const pod of this.pods.values()) pod.server.close();
  }

  private async sync(): Promise<void> {
    const { http, ns } = this.env;
    const running = new Map<string, KubeObject>();
    for (const d of (await listObjects<KubeObject>(http, DEPLOYMENT, { namespace: ns })).items)
      if (((d.spec as { replicas?: number }).replicas ?? 1) > 0 && !d.metadata.deletionTimestamp)
        running.set(d.metadata.name, d);
    for (const [name, pod] of this.pods)
      if (!running.has(name) || pod.image !== imageOf(running.get(name) as KubeObject)) {
        this.pods.delete(name);
        this.byAddress.delete(pod.address);
        pod.server.close();
      }
    // A rollout replaces the pod: a new template is a new pod.
    for (const [name, d] of running) if (!this.pods.has(name)) await this.start(name, d);
    for (const svc of (await listObjects<KubeObject>(http, SERVICE, { namespace: ns })).items) {
      const selector = (svc.spec as { selector?: Record<string, string> }).selector ?? {};
      const selected = [...this.pods.values()]
        .filter((pod) => Object.entries(selector).every(([k, v]) => pod.labels[k] === v))
        .map((pod) => pod.address)
        .sort();
      const key = svc.metadata.name;
      if (this.slices.get(key) === JSON.stringify(selected)) continue;
      await apply(http, ENDPOINT_SLICE, {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name: `${key}-played`,
          namespace: ns,
          labels: { ...svc.metadata.labels, 'kubernetes.io/service-name': key },
        },
        addressType: 'IPv4',
        endpoints: selected.map((address) => ({ addresses: [address], conditions: { ready: true } })),
        ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      });
      this.slices.set(key, JSON.stringify(selected));
    }
  }

  private async start(name: string, deployment: KubeObject): Promise<void> {
    const template = (
      deployment.spec as {
        template: { metadata: { labels: Record<string, string> }; spec: { containers: { image: string }[] } };
      }
    ).template;
    const image = imageOf(deployment);
    const server = createServer((_req, res) => res.end(JSON.stringify({ deployment: name, image })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const pod: PlayedPod = {
      address: `10.97.0.${this.next++}`,
      image,
      server,
      port: (server.address() as AddressInfo).port,
      labels: template.metadata.labels,
    };
    this.pods.set(name, pod);
    this.byAddress.set(pod.address, pod);
  }
}

describe('kube platform: a URL per commit', () => {
  let env: KubeEnv;
  let repo: RemoteRepo;
  let system: KubeSystem;
  let played: PlayedPods;
  let stopKubelet: () => void;
  /** Commits A..E: f changes in A and B, g in every one. */
  const commits: string[] = [];
  const sha = (i: number) => commits[i] as string;

  const start = (buildHistory?: number) =>
    startKubeSystem(
      { ...env.config, activationTimeoutMs: 15_000, ...(buildHistory ? { buildHistory } : {}) },
      {
        logger,
        kubeConfig: env.cluster.kubeConfig,
        endpointOrigin: (address) => played.originOf(address),
        pollMs: 100,
        idleSweepMs: 200,
      },
    );
  const call = async (path: string) => {
    const r = await fetch(`${system.url}/fn/${env.ns}/${path}/`);
    const text = await r.text();
    let body: { deployment?: string; image?: string; error?: string } = {};
    try {
      body = JSON.parse(text);
    } catch {
      body = { error: text };
    }
    return { status: r.status, body };
  };
  const deployment = (name: string) => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
  const commitDeployments = async (fn: string) =>
    (
      await listObjects<KubeObject>(env.http, DEPLOYMENT, {
        namespace: env.ns,
        labels: { 'sless.dev/commit-of': fn },
      })
    ).items
      .map((d) => d.metadata.name)
      .sort();
  const servingCommit = async (fn: string) =>
    ((await system.store.get('Function', env.ns, fn))?.status as FunctionStatus | undefined)?.servingCommit;

  beforeAll(async () => {
    env = await kubeEnv('commits');
    played = new PlayedPods(env);
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    repo = await startRemoteRepo({
      'f/function.yaml': functionManifest('f', { scaleToZero: { idleSeconds: 10 } }),
      'f/handler.js': nodeHandler(`return 'f0';`),
      'g/function.yaml': functionManifest('g', { scaleToZero: { idleSeconds: 120 } }),
      'g/handler.js': nodeHandler(`return 'g0';`),
    });
    commits.push(await git(repo.work.dir, 'rev-parse', 'HEAD'));
    system = await start();
    await system.store.apply(gitSource('repo', env.ns, repo.url));
    for (let i = 0; ; i++) {
      for (const fn of i < 2 ? ['f', 'g'] : ['g']) await completeBuild(env, fn, sha(i), `${fn}-${sha(i)}`);
      await eventually(`g serves ${sha(i).slice(0, 12)}`, async () => (await servingCommit('g')) === sha(i));
      if (i === 4) break;
      commits.push(
        await repo.push({
          'g/handler.js': nodeHandler(`return 'g${i + 1}';`),
          ...(i === 0 ? { 'f/handler.js': nodeHandler(`return 'f1';`) } : {}),
        }),
      );
      await system.controller.syncNow(env.ns, 'repo');
    }
    await eventually('f serves B', async () => (await servingCommit('f')) === sha(1));
  }, 240_000);

  afterAll(async () => {
    stopKubelet?.();
    played?.stop();
    await system?.stop();
    await repo?.close();
    await env?.close();
  });

  it("serves an old commit's own build from a Deployment of its own; the serving commit is the plain route", async () => {
    const old = await call(`f@${sha(0).slice(0, 12)}`);
    expect(old.status).toBe(200);
    expect(old.body.deployment).toBe(commitDeploymentName('f', sha(0)));
    expect(old.body.image).toContain(fakeDigest(`f-${sha(0)}`));
    // The full SHA reaches the same revision.
    expect((await call(`f@${sha(0)}`)).body.deployment).toBe(commitDeploymentName('f', sha(0)));
    // The commit serving now is the function itself.
    const current = await call(`f@${sha(1).slice(0, 12)}`);
    expect(current.status).toBe(200);
    expect(current.body.deployment).toBe('f');
    expect(current.body.image).toContain(fakeDigest(`f-${sha(1)}`));
    const made = await deployment(commitDeploymentName('f', sha(0)));
    expect(made?.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Function', name: 'f' });
    const spec = made?.spec as {
      replicas: number;
      template: { metadata: { labels: Record<string, string> } };
    };
    expect(spec.replicas).toBe(1);
    expect(spec.template.metadata.labels['sless.dev/function']).toBeUndefined();
  });

  it('never sends a plain call to a commit revision', async () => {
    expect((await call(`f@${sha(0).slice(0, 12)}`)).body.deployment).toBe(commitDeploymentName('f', sha(0)));
    // Both run now; the function's own Service must list only its own pod.
    const answers = new Set<string | undefined>();
    for (let i = 0; i < 10; i++) answers.add((await call('f')).body.deployment);
    expect([...answers]).toEqual(['f']);
  });

  it('runs at most three commit revisions of a function, the least recently used deleted first', async () => {
    // Every change to g's commit Deployments, in the API server's order: a sweep that trims soon
    // after would hide a fourth that ran beside the other three from a look at the end.
    const ofG = { 'sless.dev/commit-of': 'g' };
    const from = await listObjects<KubeObject>(env.http, DEPLOYMENT, { namespace: env.ns, labels: ofG });
    const running = new Set(from.items.map((d) => d.metadata.name));
    let most = running.size;
    const watching = new AbortController();
    const watched = watchCollection(
      env.http,
      collectionPath(DEPLOYMENT, env.ns),
      { labelSelector: labelSelector(ofG), resourceVersion: from.metadata?.resourceVersion },
      (phase, object) => {
        if (phase === 'ADDED') running.add(object.metadata.name);
        if (phase === 'DELETED') running.delete(object.metadata.name);
        most = Math.max(most, running.size);
      },
      watching.signal,
    );
    for (const i of [0, 1, 2, 3]) {
      const r = await call(`g@${sha(i).slice(0, 12)}`);
      expect(r.status).toBe(200);
      expect(r.body.deployment).toBe(commitDeploymentName('g', sha(i)));
    }
    const newest = [1, 2, 3].map((i) => commitDeploymentName('g', sha(i))).sort();
    expect(await commitDeployments('g')).toEqual(newest);
    await eventually(
      'the watch caught up',
      async () => JSON.stringify([...running].sort()) === JSON.stringify(newest),
    );
    watching.abort();
    await watched;
    // Room was made before the fourth started, not a sweep later.
    expect(most).toBe(3);
    expect(await getObject(env.http, SERVICE, env.ns, commitDeploymentName('g', sha(0)))).toBeUndefined();
    // g's revisions are far from idle: two whole idle sweeps after the fourth started leave them.
    await afterPasses(system.scaler, 'sweep', 2);
    expect(await commitDeployments('g')).toEqual(newest);
  });

  it('deletes a commit revision once idle, also after a restart, and then its build can be collected: 404', async () => {
    expect((await call(`f@${sha(0).slice(0, 12)}`)).status).toBe(200);
    // A new system with a history of one build per function: only the commit Deployment keeps A's.
    await system.stop();
    system = await start(1);
    // Still running: served at once, and noted as its last request.
    expect((await call(`f@${sha(0).slice(0, 12)}`)).body.deployment).toBe(commitDeploymentName('f', sha(0)));
    await system.gc.collect();
    expect(await getObject(env.http, JOB, env.controllerNs, buildName('f', sha(0)))).toBeDefined();
    const name = commitDeploymentName('f', sha(0));
    await eventually('f@A deleted after idle', async () => (await deployment(name)) === undefined, 30_000);
    // The sweep deletes the Deployment first (at the resourceVersion it read), then the Service.
    await eventually(
      "f@A's Service deleted with it",
      async () => (await getObject(env.http, SERVICE, env.ns, name)) === undefined,
      10_000,
    );
    await system.gc.collect();
    expect(await getObject(env.http, JOB, env.controllerNs, buildName('f', sha(0)))).toBeUndefined();
    const gone = await call(`f@${sha(0).slice(0, 12)}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error).toBe(noKeptBuildMessage(env.ns, 'f', sha(0).slice(0, 12)));
  });

  // Its 503 there is the platform contract's ('commit-url-refused'), as is the 404 of a commit never built.
  it("a disabled function's commit revisions go", async () => {
    expect((await commitDeployments('g')).length).toBeGreaterThan(0);
    await system.store.apply({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 'off', namespace: env.ns },
      spec: { type: 'http', function: 'g', enabled: false },
    } as unknown as Parameters<KubeSystem['store']['apply']>[0]);
    await eventually(
      'g Disabled',
      async () =>
        ((await system.store.get('Function', env.ns, 'g'))?.status as FunctionStatus | undefined)?.phase ===
        'Disabled',
    );
    await eventually('no g commit revisions', async () => (await commitDeployments('g')).length === 0);
  });
});
