/**
 * Cron Triggers → CronJobs, enabled:false → 0 replicas in place and a suspended CronJob, and the
 * `run-{job}-{runId}` Job a FunctionJob run is, on the real API server. What every platform shows
 * (a run per runId and no more, runId 0 Skipped, a missing function Failed, a failed run Failed and
 * final, Disabled and 503) is the platform contract's (test/platform/).
 *
 * No kubelet, Job controller or kaniko: markBuildSucceeded and markJobComplete play their parts.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { CRONJOB, DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  completeBuild,
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markJobComplete,
  playHealthyKubelet,
  specOf,
} from './harness.js';

const trigger = (enabled: boolean) =>
  `apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: tick-cron\nspec: {type: cron, function: tick, schedule: "*/5 * * * *", enabled: ${enabled}, event: {hello: cron}}\n`;
const job = (runId: number) =>
  `apiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: once\nspec: {function: tick, runId: ${runId}, event: {n: ${runId}}}\n`;

describe('kube triggers and jobs', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  let first: string;
  let stopKubelet: (() => void) | undefined;

  const commitAndSync = async (files: Record<string, string | null>) => {
    const sha = await work.commit(files);
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    await system.controller.syncNow(env.ns, 'repo');
    return sha;
  };
  const fjob = async () => await system.store.get('FunctionJob', env.ns, 'once');

  beforeAll(async () => {
    env = await kubeEnv('trig');
    const root = await tempDir('kube-git-trig');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 't.git');
    server = await startGitHttpServer(root);
    work = await TestRepo.create({
      'tick/function.yaml': functionManifest('tick', { replicas: 2 }),
      'tick/handler.js': nodeHandler(`return event;`),
      'tick/trigger.yaml': trigger(true),
      'tick/job.yaml': job(0),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 't.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    first = await git(work.dir, 'rev-parse', 'HEAD');
    // Plays the Deployment controller and kubelet: every rollout succeeds.
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
    await system.store.apply(gitSource('repo', env.ns, `${server.url}/t.git`));
    // Plays kaniko + the Job controller.
    await completeBuild(env, 'tick', first, 'tick');
    await eventually(
      'tick Ready',
      async () => (await system.store.get('Function', env.ns, 'tick'))?.status?.phase === 'Ready',
    );
  });

  afterAll(async () => {
    stopKubelet?.();
    await system?.stop();
    await server?.close();
    await work?.remove();
    await env?.close();
  });

  // Kube only: a cron Trigger is a CronJob here (the local platform schedules in process).
  it('a cron Trigger becomes a CronJob that POSTs the event to the function Service with a pinned curl', async () => {
    const cron = await eventually('CronJob', () =>
      getObject<KubeObject>(env.http, CRONJOB, env.ns, 'trigger-tick-cron'),
    );
    const spec = cron.spec as {
      schedule: string;
      suspend: boolean;
      jobTemplate: { spec: { template: { spec: { containers: { image: string; args: string[] }[] } } } };
    };
    expect(spec.schedule).toBe('*/5 * * * *');
    expect(spec.suspend).toBe(false);
    const c = spec.jobTemplate.spec.template.spec.containers[0];
    expect(c?.image).toMatch(/^curlimages\/curl:\d+\.\d+\.\d+$/);
    expect(c?.args).toContain(`http://tick.${env.ns}.svc:8080/`);
    expect(c?.args).toContain(JSON.stringify({ hello: 'cron' }));
    expect(cron.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Trigger', name: 'tick-cron' });
    const status = (await system.store.get('Trigger', env.ns, 'tick-cron'))?.status as {
      nextRun?: string;
      phase?: string;
    };
    expect(status.phase).toBe('Ready');
    expect(Date.parse(status.nextRun ?? '')).toBeGreaterThan(Date.now());
  });

  // Kube only: other managers can edit the CronJob.
  it('a CronJob deleted or edited by hand is put back by the drift watch (the resync is 10 min away)', async () => {
    const cronJob = () => getObject<KubeObject>(env.http, CRONJOB, env.ns, 'trigger-tick-cron');
    const original = await eventually('CronJob', cronJob);
    await env.http.request('DELETE', `/apis/batch/v1/namespaces/${env.ns}/cronjobs/trigger-tick-cron`);
    const recreated = await eventually('CronJob recreated', async () => {
      const now = await cronJob();
      return now && now.metadata.uid !== original.metadata.uid ? now : undefined;
    });
    expect(specOf<{ schedule: string }>(recreated).schedule).toBe('*/5 * * * *');
    // An edit by another manager (kubectl edit) is taken back: the controller owns the CronJob.
    await env.http.request('PATCH', `/apis/batch/v1/namespaces/${env.ns}/cronjobs/trigger-tick-cron`, {
      body: { spec: { schedule: '0 0 1 1 *' } },
      contentType: MERGE_PATCH,
      query: { fieldManager: 'kubectl-edit' },
    });
    await eventually(
      'schedule restored',
      async () => specOf<{ schedule: string }>(await cronJob()).schedule === '*/5 * * * *',
    );
  });

  // Kube only: the run is a Job named for its runId, running the built image with the event in its
  // env. That each runId runs once and no more is the contract's 'job-runs'.
  it('raising runId runs the function as run-{job}-{runId} with the built image and the event', async () => {
    await commitAndSync({ 'tick/job.yaml': job(1) });
    const run = await eventually('run-once-1', () =>
      getObject<KubeObject>(env.http, JOB, env.ns, 'run-once-1'),
    );
    const c = (
      run.spec as {
        template: { spec: { containers: { image: string; env: { name: string; value: string }[] }[] } };
      }
    ).template.spec.containers[0];
    expect(c?.image).toBe(`${env.config.registry}/${env.ns}-tick:${first}@${fakeDigest('tick')}`);
    expect(c?.env.find((e) => e.name === 'SLESS_EVENT')?.value).toBe('{"n":1}');
    const running = await fjob();
    expect(running?.status?.phase, JSON.stringify(running?.status)).toBe('Running');
    // Plays the Job controller: the one-shot run finished.
    await markJobComplete(env.http, env.ns, 'run-once-1');
    await eventually('Succeeded', async () => (await fjob())?.status?.phase === 'Succeeded');
    expect((await fjob())?.status?.observedRunId).toBe(1);
  });

  // Kube only: the Job controller reports the failure (played here); its message reaches status.
  // Kube only: how a disabled function is held (replicas 0 on the same Deployment, the CronJob
  // suspended). The Disabled phase and the 503 are the contract's ('cron-disabled').
  it('enabled:false scales the Deployment to 0 in place and suspends the CronJob', async () => {
    const before = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'tick');
    expect(specOf<{ replicas: number }>(before).replicas).toBe(2);
    await commitAndSync({ 'tick/trigger.yaml': trigger(false) });
    await eventually(
      'replicas 0',
      async () =>
        specOf<{ replicas: number }>(await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'tick'))
          .replicas === 0,
    );
    const after = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'tick');
    expect(after?.metadata.uid).toBe(before?.metadata.uid);
    await eventually(
      'CronJob suspended',
      async () =>
        specOf<{ suspend: boolean }>(
          await getObject<KubeObject>(env.http, CRONJOB, env.ns, 'trigger-tick-cron'),
        ).suspend,
    );
  });
});
