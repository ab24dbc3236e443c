/**
 * Build once, on the real API server: concurrent reconciles of one commit (across two builder
 * instances, as two controller replicas would be) give exactly one kaniko Job, and a controller that
 * restarts mid-build attaches to the Job it finds instead of creating another (a loop of
 * new Jobs per restart is what this prevents). While a build runs, what holds its pod (an image the
 * kubelet cannot pull) is said in the Function's status, and no longer once the pod moves on.
 *
 * No kaniko or Job controller runs here: markBuildSucceeded plays them (Job Complete via /status, a
 * build Pod whose terminated container message is the digest).
 */
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildFailedError } from '../../src/core/errors.js';
import { buildName } from '../../src/core/naming.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { loadManifests } from '../../src/manifest/load.js';
import type { KanikoBuilder } from '../../src/platform/kube/build/kaniko-builder.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { KubeStore } from '../../src/platform/kube/kube-store.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { KubeWorkloads } from '../../src/platform/kube/workloads.js';
import { planSource } from '../../src/reconcile/plan.js';
import { LocalRepositoryReader } from '../../src/source/readers.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { reconcileUntilQuiet } from '../helpers/reconcile-fakes.js';
import {
  completeBuild,
  createNamespace,
  eventually,
  fakeDigest,
  type KubeEnv,
  kanikoBuilder,
  kubeEnv,
  logger,
  markBuildFailed,
  markBuildSucceeded,
  markJobComplete,
  playHealthyKubelet,
  playKanikoPushed,
} from './harness.js';

let env: KubeEnv;
let stopKubelet: () => void;
beforeAll(async () => {
  env = await kubeEnv('builds');
  // Plays the Deployment controller and kubelet: every rollout succeeds; these tests are about builds.
  stopKubelet = playHealthyKubelet(env.http, env.ns);
});
afterAll(async () => {
  stopKubelet?.();
  await env?.close();
});

const jobsOf = async (fn: string) =>
  (
    await listObjects<KubeObject>(env.http, JOB, {
      namespace: env.controllerNs,
      labels: { 'sless.dev/function': fn, 'sless.dev/function-namespace': env.ns },
    })
  ).items;

const builder = () => kanikoBuilder(env);

/** A build of `name` (code in dir `name`) at the repository's head, as the reconciler asks for one. */
async function buildRequest(name: string, repo: TestRepo, buildKey = 'f'.repeat(32)) {
  const reader = new LocalRepositoryReader({ path: repo.dir, branch: 'main' });
  const commit = await reader.resolveHead();
  const snapshot = await reader.snapshot(commit);
  return (namespace: string) => {
    const fn: SlessFunction = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name, namespace },
      spec: {
        runtime: 'nodejs20',
        entrypoint: 'handler.handle',
        memoryMb: 128,
        timeoutSec: 30,
        replicas: 1,
        source: { path: '.' },
      },
    };
    return { fn, buildKey, commit, codeDir: name, excludedFiles: new Set<string>(), snapshot };
  };
}

describe('build once', () => {
  it('50 concurrent reconciles of one commit, over two builder instances, create exactly one Job', async () => {
    const repo = await TestRepo.create({
      'burst/function.yaml': functionManifest('burst'),
      'burst/handler.js': nodeHandler(`return 1;`),
    });
    const reader = new LocalRepositoryReader({ path: repo.dir, branch: 'main' });
    const commit = await reader.resolveHead();
    const snapshot = await reader.snapshot(commit);
    const source = gitSource('burst-src', env.ns, repo.dir);
    const loaded = await loadManifests(snapshot, { root: '.', namespace: env.ns });
    const plan = await planSource(source, snapshot, loaded);
    const store = new KubeStore({ http: env.http, logger });
    for (const object of plan.objects) await store.apply(object);
    const replicas = [builder(), builder()];
    const platform = new KubeWorkloads({ http: env.http, pollMs: 100 });
    // Fifty controllers at once, each with its own background builds, over two builder instances.
    const reconciles = Array.from({ length: 50 }, (_, i) =>
      reconcileUntilQuiet(
        {
          store,
          builder: replicas[i % 2] as KanikoBuilder,
          platform,
          logger,
          externalUrl: 'http://sless.test',
          failedBuilds: new Map(),
          snapshotFor: async () => ({ snapshot, manifestFiles: plan.manifestFiles }),
        },
        env.ns,
        'burst',
        // Fifty writers at once can make the API server answer 504 on this machine; the work queue
        // retries that, and so does this.
        { retries: 5 },
      ),
    );
    const name = await completeBuild(env, 'burst', commit, 'burst');
    // The positive signal: every one of the concurrent reconciles has finished (they wait for the
    // build). Only then is "exactly one Job" checked.
    await Promise.all(reconciles);
    expect((await jobsOf('burst')).map((j) => j.metadata.name)).toEqual([name]);
    const dep = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'burst');
    expect(JSON.stringify(dep?.spec)).toContain(`:${commit}@${fakeDigest('burst')}`);
    const fn = (await store.get('Function', env.ns, 'burst')) as SlessFunction;
    expect(fn.status?.phase).toBe('Ready');
    // A later lookup finds the build from the Job alone (durable state, not a phase).
    const found = await builder().lookup(fn, fn.metadata.annotations?.['sless.dev/build-key'] ?? '');
    expect(found?.image).toBe(`${env.config.registry}/${env.ns}-burst:${commit}@${fakeDigest('burst')}`);
    await repo.remove();
  });

  it('a controller restarted mid-build attaches to the running Job instead of creating another', async () => {
    const root = await tempDir('kube-git-restart');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    const server = await startGitHttpServer(root);
    const work = await TestRepo.create({
      'mid/function.yaml': functionManifest('mid'),
      'mid/handler.js': nodeHandler(`return 'mid';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const commit = await git(work.dir, 'rev-parse', 'HEAD');
    let system: KubeSystem | undefined = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      pollMs: 100,
    });
    try {
      await system.store.apply(gitSource('restart', env.ns, `${server.url}/r.git`));
      const name = buildName('mid', commit);
      await eventually('mid Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, name));
      // The controller goes away mid-build (the Job keeps running in the cluster)...
      await system.stop();
      // ...and a new one starts, syncs the same commit, and must attach.
      system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
      await eventually('restarted controller is building mid', async () => {
        const fn = await system?.store.get('Function', env.ns, 'mid');
        return fn?.status?.phase === 'Building';
      });
      const job = await getObject<KubeObject>(env.http, JOB, env.controllerNs, name);
      await markBuildSucceeded(env.http, env.controllerNs, name, fakeDigest('mid'));
      await eventually('mid deployed by the new controller', async () =>
        JSON.stringify(
          (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'mid'))?.spec ?? '',
        ).includes(fakeDigest('mid')),
      );
      // The new controller has finished mid (it deployed it): only then is "no other Job" checked, and
      // the one Job is the very one the first controller created, not a re-created namesake.
      expect((await jobsOf('mid')).map((j) => j.metadata.uid)).toEqual([job?.metadata.uid]);
    } finally {
      await system?.stop();
      await server.close();
      await work.remove();
    }
  });

  it('says in status what holds a build pod (an image it cannot pull), and stops once the pod moves on', async () => {
    const root = await tempDir('kube-git-held');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    const server = await startGitHttpServer(root);
    const work = await TestRepo.create({
      'held/function.yaml': functionManifest('held'),
      'held/handler.js': nodeHandler(`return 'held';`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    const commit = await git(work.dir, 'rev-parse', 'HEAD');
    const system = await startKubeSystem(env.config, {
      logger,
      kubeConfig: env.cluster.kubeConfig,
      pollMs: 100,
    });
    try {
      await system.store.apply(gitSource('held-src', env.ns, `${server.url}/r.git`));
      const name = buildName('held', commit);
      await eventually('held Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, name));
      const ready = async () => {
        const fn = await system.store.get('Function', env.ns, 'held');
        const condition = fn?.status?.conditions?.find((c) => c.type === 'Ready');
        return { phase: fn?.status?.phase, buildKey: fn?.status?.buildKey, message: condition?.message };
      };
      const building = await eventually('held building', async () => {
        const found = await ready();
        return found.phase === 'Building' && found.buildKey ? found : undefined;
      });
      const plain = `building ${building.buildKey?.slice(0, 12)} at ${commit.slice(0, 12)}`;
      expect(building.message).toBe(plain);
      // Plays the kubelet: the build pod's install step cannot pull its image.
      const pod = `${name}-held`;
      await env.http.request('POST', `/api/v1/namespaces/${env.controllerNs}/pods`, {
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: pod,
            labels: {
              'sless.dev/build': name,
              'batch.kubernetes.io/job-name': name,
              'app.kubernetes.io/component': 'build',
              'app.kubernetes.io/managed-by': 'sless',
            },
          },
          spec: {
            restartPolicy: 'Never',
            initContainers: [{ name: 'install', image: 'golang:1.21.13-bookworm' }],
            containers: [{ name: 'kaniko', image: 'kaniko:test' }],
          },
        },
      });
      const initStatus = (state: Record<string, unknown>) =>
        env.http.request('PATCH', `/api/v1/namespaces/${env.controllerNs}/pods/${pod}/status`, {
          contentType: MERGE_PATCH,
          body: {
            status: {
              phase: 'Pending',
              initContainerStatuses: [
                {
                  name: 'install',
                  image: 'golang:1.21.13-bookworm',
                  imageID: '',
                  ready: false,
                  restartCount: 0,
                  state,
                },
              ],
            },
          },
        });
      await initStatus({
        waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "golang:1.21.13-bookworm"' },
      });
      await eventually('the hold in status', async () => (await ready()).message !== plain, 10_000);
      expect(await ready()).toEqual({
        phase: 'Building',
        buildKey: building.buildKey,
        message: `${plain}: pod ${pod}, container install: ImagePullBackOff: Back-off pulling image "golang:1.21.13-bookworm"`,
      });
      // The image came: the install step runs, and nothing holds the build.
      await initStatus({ running: { startedAt: new Date().toISOString() } });
      await eventually('the hold gone from status', async () => (await ready()).message === plain, 10_000);
      expect((await ready()).phase).toBe('Building');
      await markBuildSucceeded(env.http, env.controllerNs, name, fakeDigest('held'));
      await eventually('held Ready', async () => (await ready()).phase === 'Ready', 30_000);
      // Once built, no word of the hold is left anywhere in its status.
      const fn = await system.store.get('Function', env.ns, 'held');
      expect(JSON.stringify(fn?.status)).not.toContain('ImagePullBackOff');
    } finally {
      await system.stop();
      await server.close();
      await work.remove();
    }
  });

  it('a build is found by its build key: a new builder asked for the same key at a later commit attaches to the running Job', async () => {
    const repo = await TestRepo.create({
      'later/function.yaml': functionManifest('later'),
      'later/handler.js': nodeHandler(`return 'later';`),
    });
    const key = '9'.repeat(32);
    const atC1 = (await buildRequest('later', repo, key))(env.ns);
    void builder().build(atC1);
    const job1 = await eventually('C1 Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('later', atC1.commit)),
    );
    // An env-only commit: same code, same build key, another commit. The builder that ran C1's build is
    // gone (a restarted controller has a new one).
    await repo.commit({ 'later/function.yaml': functionManifest('later', { env: { N: '2' } }) });
    const atC2 = (await buildRequest('later', repo, key))(env.ns);
    expect(atC2.commit).not.toBe(atC1.commit);
    // What the new builder sends: it either reads C1's Job by name (it attached) or creates a Job.
    const jobs = `/apis/batch/v1/namespaces/${env.controllerNs}/jobs`;
    const sent: string[] = [];
    const watching = new Proxy(env.http, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (property !== 'request') return typeof value === 'function' ? value.bind(target) : value;
        return (method: string, path: string, options?: unknown) => {
          sent.push(`${method} ${path.split('?')[0]}`);
          return target.request(method, path, options as never);
        };
      },
    });
    const built = kanikoBuilder(env, watching).build(atC2);
    const decided = await eventually('the C2 build attaches to a Job or creates one', async () =>
      sent.find((r) => r === `GET ${jobs}/${job1.metadata.name}` || r === `POST ${jobs}`),
    );
    expect(decided).toBe(`GET ${jobs}/${job1.metadata.name}`);
    await markBuildSucceeded(env.http, env.controllerNs, job1.metadata.name, fakeDigest('later'));
    const record = await built;
    // The positive signal (the C2 request resolved, with C1's build): only then "one Job" is checked.
    expect(sent).not.toContain(`POST ${jobs}`);
    expect(record.image).toBe(`${env.config.registry}/${env.ns}-later:${atC1.commit}@${fakeDigest('later')}`);
    expect(record.commit).toBe(atC1.commit);
    expect((await jobsOf('later')).map((j) => j.metadata.uid)).toEqual([job1.metadata.uid]);
    await repo.remove();
  });

  it('a failed build is final for its build key at a later commit too, until a rebuild discards it', async () => {
    const repo = await TestRepo.create({
      'flop/function.yaml': functionManifest('flop'),
      'flop/handler.js': nodeHandler(`return 'flop';`),
    });
    const key = '8'.repeat(32);
    const atC1 = (await buildRequest('flop', repo, key))(env.ns);
    const first = builder().build(atC1);
    const job1 = buildName('flop', atC1.commit);
    await eventually('C1 Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job1));
    await markBuildFailed(env.http, env.controllerNs, job1, 'kaniko: RUN npm ci failed');
    await expect(first).rejects.toBeInstanceOf(BuildFailedError);
    await repo.commit({ 'flop/function.yaml': functionManifest('flop', { env: { N: '2' } }) });
    const atC2 = (await buildRequest('flop', repo, key))(env.ns);
    // A restarted controller (a new builder) asked for the same code at C2: the same failure, no Job.
    const again = await builder()
      .build(atC2)
      .catch((e: unknown) => e);
    expect(again).toBeInstanceOf(BuildFailedError);
    expect((again as BuildFailedError).record.commit).toBe(atC1.commit);
    expect((again as BuildFailedError).message).toContain(job1);
    expect((await jobsOf('flop')).map((j) => j.metadata.name)).toEqual([job1]);
    // The API's rebuild discards the failed Job, wherever its commit: the next build runs anew at C2.
    const fn: SlessFunction = {
      ...atC2.fn,
      metadata: {
        ...atC2.fn.metadata,
        annotations: { 'sless.dev/build-key': key, 'sless.dev/commit': atC2.commit },
      },
    };
    await builder().discardFailed(fn);
    const rebuilt = builder().build({ ...atC2, fn });
    const job2 = buildName('flop', atC2.commit);
    await eventually('C2 Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job2));
    await markBuildSucceeded(env.http, env.controllerNs, job2, fakeDigest('flop'));
    expect((await rebuilt).image).toBe(
      `${env.config.registry}/${env.ns}-flop:${atC2.commit}@${fakeDigest('flop')}`,
    );
    expect((await jobsOf('flop')).map((j) => j.metadata.name)).toEqual([job2]);
    await repo.remove();
  });

  it('a build is done once kaniko exited 0 with its digest, before the Job controller marks the Job Complete', async () => {
    const repo = await TestRepo.create({
      'early/function.yaml': functionManifest('early'),
      'early/handler.js': nodeHandler(`return 'early';`),
    });
    const request = (await buildRequest('early', repo, 'e'.repeat(32)))(env.ns);
    const { fn, buildKey, commit } = request;
    const b = builder();
    const built = b.build(request);
    const job = buildName('early', commit);
    await eventually('build Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job));
    // kaniko pushed and exited; the Job controller has not caught up (the Job stays incomplete).
    await playKanikoPushed(env.http, env.controllerNs, job, fakeDigest('early'));
    const image = `${env.config.registry}/${env.ns}-early:${commit}@${fakeDigest('early')}`;
    expect((await built).image).toBe(image);
    const after = await getObject<KubeObject>(env.http, JOB, env.controllerNs, job);
    expect((after?.status as { conditions?: unknown[] } | undefined)?.conditions ?? []).toEqual([]);
    expect(after?.metadata.annotations?.['sless.dev/digest']).toBe(fakeDigest('early'));
    // The next reconcile finds the build meanwhile (no Building again), and after Complete too.
    expect((await b.lookup(fn, buildKey))?.image).toBe(image);
    await markJobComplete(env.http, env.controllerNs, job);
    expect((await builder().lookup(fn, buildKey))?.image).toBe(image);
    await repo.remove();
  });

  it('a new build reads its Job once before creating it: the read that picks the name is the read of the Job', async () => {
    const repo = await TestRepo.create({
      'once/function.yaml': functionManifest('once'),
      'once/handler.js': nodeHandler(`return 'once';`),
    });
    const request = (await buildRequest('once', repo, 'c'.repeat(32)))(env.ns);
    const job = buildName('once', request.commit);
    const sent: string[] = [];
    const counting = new Proxy(env.http, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (property !== 'request') return typeof value === 'function' ? value.bind(target) : value;
        return (method: string, path: string, options?: unknown) => {
          sent.push(`${method} ${path.split('?')[0]}`);
          return target.request(method, path, options as never);
        };
      },
    });
    const built = kanikoBuilder(env, counting).build(request);
    await eventually('build Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job));
    await playKanikoPushed(env.http, env.controllerNs, job, fakeDigest('once'));
    await built;
    const created = sent.indexOf(`POST /apis/batch/v1/namespaces/${env.controllerNs}/jobs`);
    expect(created).toBeGreaterThan(0);
    expect(
      sent
        .slice(0, created)
        .filter((r) => r === `GET /apis/batch/v1/namespaces/${env.controllerNs}/jobs/${job}`),
    ).toHaveLength(1);
    await repo.remove();
  });

  it('stop() waits for a build context being written, so its staging directory is gone when the process exits', async () => {
    const repo = await TestRepo.create({
      'halt/function.yaml': functionManifest('halt'),
      'halt/handler.js': nodeHandler(`return 'halt';`),
    });
    const request = (await buildRequest('halt', repo, 'd'.repeat(32)))(env.ns);
    const staged = () =>
      readdir(tmpdir()).then((names) => names.filter((n) => n.startsWith(`sless-context-${process.pid}-`)));
    let reached!: () => void;
    const reading = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { snapshot } = request;
    const gated = {
      ...snapshot,
      listFiles: snapshot.listFiles.bind(snapshot),
      readFile: async (path: string, oid?: string) => {
        reached();
        await released;
        return snapshot.readFile(path, oid);
      },
    };
    const b = builder();
    void b.build({ ...request, snapshot: gated });
    await reading;
    const writing = await staged();
    expect(writing).toHaveLength(1);
    let stopped = false;
    const stopping = b.stop().then(() => {
      stopped = true;
    });
    // A round trip to the API server: stop() had every chance to settle, and has not.
    await getObject<KubeObject>(env.http, JOB, env.controllerNs, 'no-such-job');
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(await staged()).toEqual([]);
    await repo.remove();
  });

  it("the same function name at the same commit in two namespaces gets two Jobs, never the other tenant's build", async () => {
    const repo = await TestRepo.create({
      'same/function.yaml': functionManifest('same'),
      'same/handler.js': nodeHandler(`return 'same';`),
    });
    const request = await buildRequest('same', repo);
    const { commit } = request(env.ns);
    const other = `${env.ns}-b`;
    await createNamespace(env.http, other);
    const b = builder();
    const first = b.build(request(env.ns));
    await eventually('first Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('same', commit)),
    );
    const second = b.build(request(other));
    const salted = await eventually('second Job', async () => {
      const all = (
        await listObjects<KubeObject>(env.http, JOB, {
          namespace: env.controllerNs,
          labels: { 'sless.dev/function': 'same' },
        })
      ).items;
      return all.length === 2 ? all.find((j) => j.metadata.name !== buildName('same', commit)) : undefined;
    });
    expect(salted.metadata.labels?.['sless.dev/function-namespace']).toBe(other);
    expect(salted.metadata.name).toMatch(new RegExp(`^build-same-${commit.slice(0, 12)}-[0-9a-f]{8}$`));
    await markBuildSucceeded(env.http, env.controllerNs, buildName('same', commit), fakeDigest('same-a'));
    await markBuildSucceeded(env.http, env.controllerNs, salted.metadata.name, fakeDigest('same-b'));
    expect((await first).image).toBe(
      `${env.config.registry}/${env.ns}-same:${commit}@${fakeDigest('same-a')}`,
    );
    expect((await second).image).toBe(
      `${env.config.registry}/${other}-same:${commit}@${fakeDigest('same-b')}`,
    );
    await repo.remove();
  });
});
