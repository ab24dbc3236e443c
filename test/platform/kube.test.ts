/**
 * The platform contract on the kube platform: startKubeSystem against the real kube-apiserver + etcd,
 * S3 and registry of test/cluster, reading a git server (git http-backend).
 *
 * There is no node here, so this driver plays what one would do, and each part says so:
 * - kaniko and the Job controller (finishBuild / failBuild: completeBuild, markBuildFailed);
 * - the Deployment controller and kubelet (playKubelet below): a Deployment whose status lags its
 *   spec is made available, or, for a function the contract says crash-loops, left with its old pod
 *   available and a new pod in CrashLoopBackOff;
 * - the pods behind each Service (the stand-in upstream): /fn/ is routed to one HTTP server
 *   (`originOf`) that answers as the function's available pods would, `{ version, word }`: the
 *   version of the handler at the commit its image was built from (the image tag) and the WORD of
 *   its container's env, from the Deployment template the kubelet last made available;
 * - the Job controller for FunctionJob runs (finishJobRun: markJobComplete);
 * - the kubelet's reading of secretKeyRef variables at container start: a pod whose Secret or key is
 *   missing does not start (the Deployment stays unavailable), as CreateContainerConfigError would;
 * - the EndpointSlice controller: each Deployment's slice lists one ready endpoint once its pods
 *   run, and none from before they stop (a function at zero is woken once its endpoint is ready).
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { loadCodeGateSettings } from '../../src/config/code-gate.js';
import { DEFAULT_BUILD_HISTORY } from '../../src/config/config.js';
import { buildName } from '../../src/core/naming.js';
import { previewFunctionName } from '../../src/core/previews.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB, POD, SECRET, SERVICE, slessType } from '../../src/platform/kube/resource-types.js';
import { afterTicks } from '../helpers/after-ticks.js';
import { git, gitSource, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  markBuildFailed,
  markDeploymentAvailable,
  markJobComplete,
  markJobFailed,
} from '../kube/harness.js';
import { deploymentLags, playCrashLoopingPod, publishPlayedEndpoint } from '../kube/play.js';
import {
  answerStatus,
  askedOf,
  type ContractServices,
  type Delivery,
  handlerAnswers,
  handlerHolds,
  handlerPath,
  handlerReportsInstance,
  type PlatformUnderTest,
  PREVIEWS,
  platformContract,
  served,
  versionOfHandler,
} from './contract.js';

/** Short, so a crash-looping revision is RolloutFailed soon; long enough for a played rollout. */
const ROLLOUT_DEADLINE_MS = 4000;
/** How often the autoscaler looks at the load: often, so a function scales soon after it changes. */
const AUTOSCALE_TICK_MS = 200;
/** The build history limit the contract's platform runs with: sless's default. */
const BUILD_HISTORY = DEFAULT_BUILD_HISTORY;

interface Container {
  image: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
}
interface DeploymentSpec {
  replicas?: number;
  template: { metadata?: { annotations?: Record<string, string> }; spec: { containers: Container[] } };
}

/**
 * What the available pods of a function run: the template of the Deployment they came from, how many
 * there are, and the id their handler drew when they started (pods made again draw another).
 */
interface Pods {
  image: string;
  word: string | null;
  replicas: number;
  instance: string;
  /** The pod template they were made from: a generation that keeps it starts no new pod. */
  template: string;
}

async function kubePlatform({ gate, sops, amqpUrl }: ContractServices): Promise<PlatformUnderTest> {
  const env: KubeEnv = await kubeEnv('contract');
  const root = await tempDir('contract-git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  const gitServer = await startGitHttpServer(root);
  const work = await TestRepo.create({ 'README.md': 'the platform contract commits here\n' });
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');

  const available = new Map<string, Pods>();
  /** Pods the played kubelet started, by function: one per start of a revision or from zero. */
  const started = new Map<string, number>();
  const crashLooping = new Set<string>();
  const holding = new HeldRequests();
  /** Tagged requests the stand-in pods answered for handlers written with `answers`, by function. */
  const delivered = new Map<string, Delivery[]>();
  const upstream = await startUpstream(available, holding, delivered, work);
  const stopKubelet = playKubelet(env, available, started, crashLooping);
  const port = (upstream.address() as AddressInfo).port;
  // The operator's age key, as Flux's sops-age Secret, in the controller namespace.
  await env.http.request('POST', `/api/v1/namespaces/${env.controllerNs}/secrets`, {
    body: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'sless-sops-age', namespace: env.controllerNs },
      stringData: { 'age.agekey': await readFile(sops.keyFile, 'utf8') },
    },
  });
  const logLines: string[] = [];
  const capture = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const system: KubeSystem = await startKubeSystem(
    {
      ...env.config,
      rolloutDeadlineMs: ROLLOUT_DEADLINE_MS,
      // Asynchronous invocations are journaled in a real RabbitMQ's stream, as in production.
      asyncInvocations: { amqpUrl, stream: `sless.invocations.${env.ns}` },
      sopsBinary: sops.binary,
      buildHistory: BUILD_HISTORY,
      codeGate: loadCodeGateSettings({
        LLM_ENABLED: 'true',
        LLM_ENDPOINT: gate.url,
        LLM_API_KEY: gate.apiKey,
        LLM_TIMEOUT: '5s',
      }),
    },
    {
      logger: pino({ level: 'debug' }, capture),
      kubeConfig: env.cluster.kubeConfig,
      originOf: () => `http://127.0.0.1:${port}`,
      pollMs: 100,
      // Idle functions are looked for often, so one that rests at zero does so soon after idleSeconds;
      // and the autoscaler looks at the load often, so a function scales soon after it changes.
      idleSweepMs: 200,
      autoscaleTickMs: AUTOSCALE_TICK_MS,
    },
  );
  await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`, { previews: PREVIEWS }));

  /** The run Jobs `jobRuns` has seen, by FunctionJob and uid. */
  const runUids = new Set<string>();
  const buildJobs = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': name, 'sless.dev/function-namespace': env.ns },
      })
    ).items;

  /** The name of run `runId`'s Job of FunctionJob `job`, once the controller made it. */
  const runJob = async (job: string, runId: number) => {
    const name = `run-${job}-${runId}`;
    await eventually(`run Job ${name}`, () => getObject<KubeObject>(env.http, JOB, env.ns, name));
    return name;
  };

  return {
    namespace: env.ns,
    sourceName: 'repo',
    countingEnv: {},
    commit: async (files) => {
      const sha = await work.commit(files);
      await git(work.dir, 'push', '--quiet', 'origin', 'main');
      return sha;
    },
    pushBranch: async (branch, files) => {
      if (!files) {
        await git(work.dir, 'push', '--quiet', 'origin', '--delete', branch);
        await git(work.dir, 'update-ref', '-d', `refs/heads/${branch}`);
        return undefined;
      }
      const sha = await work.commitBranch(branch, files);
      await git(work.dir, 'push', '--quiet', '--force', 'origin', branch);
      return sha;
    },
    sync: async (options) => {
      await system.controller.syncNow(env.ns, 'repo', options);
    },
    source: () => system.store.get('GitSource', env.ns, 'repo'),
    fn: (name) => system.store.get('Function', env.ns, name),
    trigger: (name) => system.store.get('Trigger', env.ns, name),
    job: (name) => system.store.get('FunctionJob', env.ns, name),
    applyJob: async (name, spec) => {
      if (spec === null) await system.store.delete('FunctionJob', env.ns, name);
      else
        await system.store.apply({
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'FunctionJob',
          metadata: { name, namespace: env.ns },
          spec,
        });
    },
    call: async (name) => served(await fetch(`${system.url}/fn/${env.ns}/${name}`)),
    api: async (method, path, body) =>
      served(
        await fetch(`${system.url}${path}`, {
          method,
          ...(body === undefined
            ? {}
            : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        }),
      ),
    // The controller namespace: there since install, and the place a tenant's functions must not reach.
    otherNamespace: env.controllerNs,
    // As its owner would: the whole Secret replaced (an apply of stringData would keep removed keys).
    setSecret: async (name, data, namespace = env.ns) => {
      const body = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace },
        data: Object.fromEntries(
          Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
        ),
      };
      const existing = await getObject<KubeObject>(env.http, SECRET, namespace, name);
      if (!existing) await env.http.request('POST', `/api/v1/namespaces/${namespace}/secrets`, { body });
      else
        await env.http.request('PUT', `/api/v1/namespaces/${namespace}/secrets/${name}`, {
          body: {
            ...body,
            metadata: { ...body.metadata, resourceVersion: existing.metadata.resourceVersion },
          },
        });
    },
    logged: () => logLines.join(''),
    // Secrets are left out: they are the store. Everything else the controller writes or records.
    stored: async () => {
      const objects: string[] = [];
      for (const ns of [env.ns, env.controllerNs])
        for (const path of [
          `/apis/apps/v1/namespaces/${ns}/deployments`,
          `/api/v1/namespaces/${ns}/services`,
          `/api/v1/namespaces/${ns}/events`,
          `/api/v1/namespaces/${ns}/pods`,
          `/apis/batch/v1/namespaces/${ns}/jobs`,
          `/apis/batch/v1/namespaces/${ns}/cronjobs`,
          `/api/v1/namespaces/${ns}/configmaps`,
          `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
          `/apis/sless.dev/v1alpha1/namespaces/${ns}/functions`,
          `/apis/sless.dev/v1alpha1/namespaces/${ns}/gitsources`,
          `/apis/sless.dev/v1alpha1/namespaces/${ns}/triggers`,
          `/apis/sless.dev/v1alpha1/namespaces/${ns}/functionjobs`,
        ])
          objects.push(JSON.stringify(await env.http.request('GET', path)));
      return objects.join('\n');
    },
    // Plays kaniko and the Job controller: the build Job completes with a digest.
    finishBuild: async (name, commit) => {
      await completeBuild(env, name, commit, `${name}@${commit}`);
    },
    // Plays the Job controller: kaniko failed.
    failBuild: async (name, commit) => {
      const message = 'kaniko: RUN npm ci failed';
      const job = buildName(name, commit);
      // The Job of this build, not one that already failed: a rebuild makes it again under its name.
      await eventually(`build Job ${job}`, async () => {
        const found = await getObject<KubeObject>(env.http, JOB, env.controllerNs, job);
        const conditions = (found?.status as { conditions?: { type: string }[] } | undefined)?.conditions;
        return found && !conditions?.some((c) => c.type === 'Failed' || c.type === 'Complete');
      });
      await markBuildFailed(env.http, env.controllerNs, job, message);
      return message;
    },
    rollouts: async (name, outcome) => {
      if (outcome === 'crashLoop') crashLooping.add(name);
      else crashLooping.delete(name);
      return 'CrashLoopBackOff';
    },
    builds: async (name) => (await buildJobs(name)).length,
    buildHistory: BUILD_HISTORY,
    workloadGone: async (name) => {
      const contexts = await env.s3.send(
        new ListObjectsV2Command({ Bucket: env.bucket, Prefix: `contexts/${env.ns}/${name}/` }),
      );
      return (
        // The object itself, not only as the store shows it: a deleting one reads as gone there.
        (await getObject(env.http, slessType('Function'), env.ns, name)) === undefined &&
        (await getObject(env.http, DEPLOYMENT, env.ns, name)) === undefined &&
        (await getObject(env.http, SERVICE, env.ns, name)) === undefined &&
        (await buildJobs(name)).length === 0 &&
        (contexts.Contents ?? []).length === 0
      );
    },
    // Plays the Job controller: the one-shot run finished.
    finishJobRun: async (job, runId) => {
      await markJobComplete(env.http, env.ns, await runJob(job, runId));
    },
    // Plays the Job controller: the run's pod failed past its backoff limit.
    failJobRun: async (job, runId) => {
      await markJobFailed(
        env.http,
        env.ns,
        await runJob(job, runId),
        'Job has reached the specified backoff limit',
      );
      return 'backoff limit';
    },
    running: async (name) => available.get(name)?.replicas ?? 0,
    starts: async (name) => started.get(name) ?? 0,
    held: async (name) => holding.count(name),
    deliveries: async (name) => [...(delivered.get(name) ?? [])],
    autoscalerWatched: (ms) => afterTicks(system.autoscaler, Math.ceil(ms / AUTOSCALE_TICK_MS) + 1),
    release: async (name) => holding.release(name),
    // Each run Job counts once by its uid: a run Job deleted and made again under the same name is a
    // second run, which counting the Jobs there are now would miss.
    jobRuns: async (job) => {
      const jobs = await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.ns,
        labels: { 'sless.dev/functionjob': job },
      });
      for (const run of jobs.items) runUids.add(`${job}/${run.metadata.uid}`);
      return [...runUids].filter((key) => key.startsWith(`${job}/`)).length;
    },
    settle: () => system.controller.idle(),
    stop: async () => {
      holding.releaseAll();
      stopKubelet();
      await system.stop();
      await new Promise((r) => upstream.close(r));
      await gitServer.close();
      await work.remove();
      await env.close();
    },
  };
}

/**
 * The requests the stand-in pods hold for functions whose handler holds them (`handlerHolds`), until
 * the contract releases that function; after that, its requests answer at once.
 */
class HeldRequests {
  private readonly answers = new Map<string, (() => void)[]>();
  private readonly counts = new Map<string, number>();
  private readonly released = new Set<string>();

  /** Answers now when `name` was released, or holds the answer until it is. */
  hold(name: string, answer: () => void): void {
    if (this.released.has(name)) {
      answer();
      return;
    }
    this.counts.set(name, this.count(name) + 1);
    this.answers.set(name, [...(this.answers.get(name) ?? []), answer]);
  }

  count(name: string): number {
    return this.counts.get(name) ?? 0;
  }

  release(name: string): void {
    this.released.add(name);
    for (const answer of this.answers.get(name) ?? []) answer();
    this.answers.delete(name);
  }

  /** Lets every request still held answer, as the pods would when they stop. */
  releaseAll(): void {
    for (const name of [...this.answers.keys()]) this.release(name);
  }
}

/**
 * Stands in for every function's pods behind its Service: answers as the pods the kubelet made
 * available would, with the version of the handler committed at the image's commit.
 */
async function startUpstream(
  available: ReadonlyMap<string, Pods>,
  holding: HeldRequests,
  delivered: Map<string, Delivery[]>,
  work: TestRepo,
): Promise<Server> {
  const server = createServer((req, res) => {
    // The proxy names the function in X-Forwarded-Prefix: /fn/{ns}/{name}, or {name}@{label} for a
    // branch preview, whose pods are its own Deployment's and whose code is at the function's path.
    const [name = '', label] = (String(req.headers['x-forwarded-prefix'] ?? '').split('/')[3] ?? '').split(
      '@',
    );
    const pods = available.get(label ? previewFunctionName(name, label) : name);
    const commit = pods && /:([0-9a-f]{40})@sha256:/.exec(pods.image)?.[1];
    if (!pods || !commit) {
      res.statusCode = 502;
      res.end(JSON.stringify({ error: `no available pod of ${name}` }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    Promise.all([once(req, 'end'), git(work.dir, 'show', `${commit}:${handlerPath(name)}`)]).then(
      ([, source]) => {
        const body = JSON.stringify({
          version: versionOfHandler(source) ?? null,
          word: pods.word,
          ...(handlerReportsInstance(source) ? { instance: pods.instance } : {}),
        });
        // A handler that answers by what a request asks, and on which attempt, is played the same way.
        let status = 200;
        if (handlerAnswers(source)) {
          const attempt = Number(req.headers['x-sless-attempt'] ?? 0);
          const event = jsonOr(Buffer.concat(chunks).toString('utf8'));
          const tag = event && typeof event === 'object' ? (event as { tag?: unknown }).tag : undefined;
          if (typeof tag === 'string')
            delivered.set(name, [...(delivered.get(name) ?? []), { tag, attempt }]);
          status = answerStatus(askedOf(event, new URL(req.url ?? '/', 'http://pod').pathname), attempt);
        }
        if (status !== 200) {
          res.statusCode = status;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ status }));
        } else if (handlerHolds(source)) holding.hold(name, () => res.end(body));
        else res.end(body);
      },
      (error: unknown) => {
        res.statusCode = 502;
        res.end(JSON.stringify({ error: String(error) }));
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/** A request body as a handler's event holds it: parsed when it is JSON, else the text. */
function jsonOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Plays the Deployment controller and kubelet for the namespace: every Deployment whose status lags
 * its spec is rolled out and available, unless its function crash-loops. Then its old pod stays
 * available (what it runs keeps serving) and the new revision's pod is in CrashLoopBackOff.
 * Returns the function that stops playing.
 */
function playKubelet(
  env: KubeEnv,
  available: Map<string, Pods>,
  started: Map<string, number>,
  crashLooping: ReadonlySet<string>,
): () => void {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      try {
        const list = await env.http.request<{ items: KubeObject[] }>(
          'GET',
          `/apis/apps/v1/namespaces/${env.ns}/deployments`,
        );
        for (const deployment of list.items ?? []) {
          if (!deploymentLags(deployment)) continue;
          const name = deployment.metadata.name;
          const spec = deployment.spec as DeploymentSpec;
          const revision = spec.template.metadata?.annotations?.['sless.dev/revision'] ?? '';
          if (crashLooping.has(name)) {
            await playCrashLoop(env, deployment, revision);
            continue;
          }
          const container = spec.template.spec.containers[0];
          // The kubelet reads a secretKeyRef at container start; without the Secret or the key, no pod starts.
          const word = container && (await wordOf(env, container));
          const replicas = spec.replicas ?? 1;
          if (word === undefined && replicas > 0) continue;
          // Pods stopping leave their endpoint first; pods starting are listed once they run.
          if (replicas === 0 || !container) await publishPlayedEndpoint(env.http, env.ns, deployment, false);
          await markDeploymentAvailable(env.http, env.ns, name, deployment);
          const template = JSON.stringify(spec.template);
          const before = available.get(name);
          if (replicas === 0 || !container) available.delete(name);
          else if (before?.template === template && before.replicas === replicas) {
            // A new generation with the same pods (an annotation written, which bumps a Deployment's
            // generation): the Deployment controller starts no pod for it, and neither does this.
          } else {
            available.set(name, {
              image: container.image,
              word: word ?? null,
              replicas,
              instance: randomUUID(),
              template,
            });
            started.set(name, (started.get(name) ?? 0) + 1);
            await publishPlayedEndpoint(env.http, env.ns, deployment, true);
          }
          // The pods of other revisions are gone once this one is rolled out.
          await removePods(env, name);
        }
      } catch {
        // A Deployment went away meanwhile: look again next round.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return () => {
    stopped = true;
  };
}

/**
 * The WORD a container of `env.ns` starts with: its value, or its secretKeyRef read now, as the
 * kubelet reads it; null when there is none, undefined when the Secret or its key is missing.
 */
async function wordOf(env: KubeEnv, container: Container): Promise<string | null | undefined> {
  const variable = container.env?.find((e) => e.name === 'WORD');
  const ref = variable?.valueFrom?.secretKeyRef;
  if (!ref) return variable?.value ?? null;
  const secret = await getObject<KubeObject & { data?: Record<string, string> }>(
    env.http,
    SECRET,
    env.ns,
    ref.name,
  );
  const value = secret?.data?.[ref.key];
  return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
}

/**
 * Plays the Deployment controller and kubelet for a revision that never comes up: one new pod
 * created, the old one still up and available, and the new pod's container exiting and backing off.
 */
async function playCrashLoop(env: KubeEnv, deployment: KubeObject, revision: string): Promise<void> {
  const name = deployment.metadata.name;
  await env.http.request('PATCH', `/apis/apps/v1/namespaces/${env.ns}/deployments/${name}/status`, {
    contentType: MERGE_PATCH,
    body: {
      status: {
        observedGeneration: deployment.metadata.generation,
        replicas: 2,
        updatedReplicas: 1,
        readyReplicas: 1,
        availableReplicas: 1,
        unavailableReplicas: 1,
      },
    },
  });
  const pod = `${name}-${revision}`;
  if (await getObject(env.http, POD, env.ns, pod)) return;
  await playCrashLoopingPod(env.http, env.ns, pod, name, revision);
}

async function removePods(env: KubeEnv, name: string): Promise<void> {
  const pods = await listObjects<KubeObject>(env.http, POD, {
    namespace: env.ns,
    labels: { 'sless.dev/function': name },
  });
  for (const pod of pods.items)
    await env.http
      .request('DELETE', `/api/v1/namespaces/${env.ns}/pods/${pod.metadata.name}`)
      .catch(() => undefined);
}

platformContract('kube', kubePlatform);
