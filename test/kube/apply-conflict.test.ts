/**
 * Server-side apply without force on what the controller does not own by design: a Function applied
 * from git whose field another field manager set (here `kubectl edit`) is not taken over. The sync
 * says so in the GitSource's status and in an Event, and the other manager's value stays. The
 * controller's own Deployments, Services and CronJobs are still taken back (rollout.test.ts and
 * triggers-jobs.test.ts: drift repair).
 *
 * No kubelet or kaniko: the Function is never built here; this is about the custom resource.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GitSourceStatus, SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { slessType } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { type KubeEnv, kubeEnv, logger } from './harness.js';

interface ManagedField {
  manager: string;
  fieldsV1?: { 'f:spec'?: Record<string, unknown> };
}

describe('server-side apply without force', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let server: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;

  const push = () => git(work.dir, 'push', '--quiet', 'origin', 'main');
  const fnObject = () => getObject<KubeObject>(env.http, slessType('Function'), env.ns, 'alpha');

  beforeAll(async () => {
    env = await kubeEnv('ssa');
    const root = await tempDir('kube-git-ssa');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'r.git');
    server = await startGitHttpServer(root);
    work = await TestRepo.create({
      'alpha/function.yaml': functionManifest('alpha', { memoryMb: 128 }),
      'alpha/handler.js': nodeHandler(`return 1;`),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'r.git'));
    await push();
    system = await startKubeSystem(env.config, { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 });
    await system.store.apply(gitSource('repo', env.ns, `${server.url}/r.git`));
  });

  afterAll(async () => {
    await system?.stop();
    await server?.close();
    await work?.remove();
    await env?.close();
  });

  it('a field another manager owns is not taken: the conflict is in status and an Event, and the other value stays', async () => {
    expect((await system.controller.syncNow(env.ns, 'repo'))?.outcome).toBe('synced');
    expect((await fnObject())?.spec).toMatchObject({ memoryMb: 128 });
    // Someone edits the Function by hand: `kubectl edit` is an Update under its own field manager.
    await env.http.request('PATCH', `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions/alpha`, {
      body: { spec: { memoryMb: 512 } },
      contentType: MERGE_PATCH,
      query: { fieldManager: 'kubectl-edit' },
    });
    const owners = ((await fnObject())?.metadata.managedFields ?? []) as ManagedField[];
    expect(owners.find((m) => m.manager === 'kubectl-edit')?.fieldsV1?.['f:spec']).toHaveProperty(
      'f:memoryMb',
    );

    // git now says 256: sless would have to take the field to apply it.
    await work.commit({ 'alpha/function.yaml': functionManifest('alpha', { memoryMb: 256 }) });
    await push();
    const result = await system.controller.syncNow(env.ns, 'repo');
    expect(result?.outcome).toBe('failed');
    expect(result?.message).toMatch(
      /^Function .*\/alpha not applied: .*conflict with "kubectl-edit".*\.spec\.memoryMb/,
    );

    // Status says why, with its own reason; the other manager's value stays.
    const source = await system.store.get('GitSource', env.ns, 'repo');
    const ready = (source?.status as GitSourceStatus | undefined)?.conditions?.find(
      (c) => c.type === 'Ready',
    );
    expect(ready).toMatchObject({ status: 'False', reason: 'ApplyConflict' });
    expect(ready?.message).toContain('"kubectl-edit"');
    expect(ready?.message).toContain('.spec.memoryMb');
    expect(((await system.store.get('Function', env.ns, 'alpha')) as SlessFunction).spec.memoryMb).toBe(512);
    const events = await env.http.request<{ items: { type: string; reason: string; message: string }[] }>(
      'GET',
      `/api/v1/namespaces/${env.ns}/events`,
      { query: { fieldSelector: 'involvedObject.kind=GitSource,involvedObject.name=repo' } },
    );
    expect(
      events.items.find((e) => e.type === 'Warning' && e.message.includes('"kubectl-edit"')),
    ).toBeDefined();

    // Once the other manager gives the field git's value, the next sync goes through and says so.
    await env.http.request('PATCH', `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions/alpha`, {
      body: { spec: { memoryMb: 256 } },
      contentType: MERGE_PATCH,
      query: { fieldManager: 'kubectl-edit' },
    });
    const retried = await system.controller.syncNow(env.ns, 'repo', { force: true });
    expect(retried?.outcome, retried?.message).toBe('synced');
    expect((await fnObject())?.spec).toMatchObject({ memoryMb: 256 });
    const after = await system.store.get('GitSource', env.ns, 'repo');
    expect(
      (after?.status as GitSourceStatus | undefined)?.conditions?.find((c) => c.type === 'Ready'),
    ).toMatchObject({
      status: 'True',
      reason: 'Synced',
    });
  });
});
