/**
 * Build once, the AlreadyExists half, on the real API server: another replica creates the very Job
 * this builder is about to create, between this builder's read (no Job yet) and its create. The
 * create then answers 409, and that counts as success: the builder attaches to the Job it lost the
 * race to and reports its build. The race is made certain, not hoped for: the Job's POST is sent
 * once more, just before this builder's own, as the other replica would have sent it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildName } from '../../src/core/naming.js';
import type { SlessFunction } from '../../src/core/resources.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { JOB } from '../../src/platform/kube/resource-types.js';
import { LocalRepositoryReader } from '../../src/source/readers.js';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { eventually, fakeDigest, type KubeEnv, kanikoBuilder, kubeEnv, playKanikoPushed } from './harness.js';

let env: KubeEnv;
beforeAll(async () => {
  env = await kubeEnv('build-conflict');
});
afterAll(async () => {
  await env?.close();
});

it("a Job another replica created between this builder's read and its create is this build: 409 attaches", async () => {
  const repo = await TestRepo.create({
    'race/function.yaml': functionManifest('race'),
    'race/handler.js': nodeHandler(`return 'race';`),
  });
  const reader = new LocalRepositoryReader({ path: repo.dir, branch: 'main' });
  const commit = await reader.resolveHead();
  const snapshot = await reader.snapshot(commit);
  const fn: SlessFunction = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name: 'race', namespace: env.ns },
    spec: {
      runtime: 'nodejs20',
      entrypoint: 'handler.handle',
      memoryMb: 128,
      timeoutSec: 30,
      replicas: 1,
      source: { path: '.' },
    },
  };
  const jobs = `/apis/batch/v1/namespaces/${env.controllerNs}/jobs`;
  const answers: string[] = [];
  const racing = new Proxy(env.http, {
    get(target, property) {
      const value = Reflect.get(target, property);
      if (property !== 'request') return typeof value === 'function' ? value.bind(target) : value;
      return async (method: string, path: string, options?: unknown) => {
        if (method === 'POST' && path.split('?')[0] === jobs && answers.length === 0) {
          // The other replica's create, with the same name and body: it wins.
          await target.request(method, path, options as never);
          answers.push('other replica created the Job');
        }
        return target.request(method, path, options as never);
      };
    },
  });
  const name = buildName('race', commit);
  const built = kanikoBuilder(env, racing).build({
    fn,
    buildKey: 'a'.repeat(32),
    commit,
    codeDir: 'race',
    excludedFiles: new Set<string>(),
    snapshot,
  });
  await eventually('build Job', () => getObject<KubeObject>(env.http, JOB, env.controllerNs, name));
  await playKanikoPushed(env.http, env.controllerNs, name, fakeDigest('race'));
  expect((await built).image).toBe(`${env.config.registry}/${env.ns}-race:${commit}@${fakeDigest('race')}`);
  expect(answers).toEqual(['other replica created the Job']);
  const all = await listObjects<KubeObject>(env.http, JOB, {
    namespace: env.controllerNs,
    labels: { 'sless.dev/function': 'race', 'sless.dev/function-namespace': env.ns },
  });
  expect(all.items.map((j) => j.metadata.name)).toEqual([name]);
  await repo.remove();
});
