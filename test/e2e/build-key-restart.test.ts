/**
 * Issue 22, item 5, on the real node: kaniko builds a function's code at C1; an env-only commit C2 is
 * synced while it builds; the controller stops mid-build and a new one starts. The new controller
 * waits for the build at C1 (same build key) instead of building the same code again: one kaniko Job,
 * one image, tagged C1, served with C2's env.
 *
 * The controller runs in this process (as everywhere in test/e2e), so "stops" is KubeSystem.stop(),
 * not a SIGKILL; the SIGKILL of a real controller process is test/kube/build-key-restart.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus, SlessFunction } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { jobSucceeded } from '../../src/platform/kube/job-status.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { eventually, specOf } from '../kube/harness.js';
import { type E2eEnv, logger, registryDigest, startE2e } from './harness.js';

const BUILD_MS = 10 * 60_000;

describe('real node: an env-only commit mid-build and a controller restart make one kaniko build', () => {
  let env: E2eEnv;
  let second: KubeSystem | undefined;

  beforeAll(async () => {
    env = await startE2e('bkey', {
      'hello/function.yaml': functionManifest('hello', { env: { N: '1' } }),
      'hello/handler.js': nodeHandler(`return 'hello v1';`),
    });
  }, 15 * 60_000);

  afterAll(async () => {
    await second?.stop();
    await env?.close();
  }, 300_000);

  const jobs = async () =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'hello', 'sless.dev/function-namespace': env.ns },
      })
    ).items;

  it(
    'the restarted controller waits for the build at C1 and serves its image with C2’s env',
    async () => {
      const c1 = await git(env.repo.dir, 'rev-parse', 'HEAD');
      const job1 = await eventually(
        'kaniko Job at C1',
        async () => (await jobs()).find((j) => j.metadata.name === `build-hello-${c1.slice(0, 12)}`),
        120_000,
      );
      const c2 = await env.commit({ 'hello/function.yaml': functionManifest('hello', { env: { N: '2' } }) });
      const fn = (await env.system.store.get('Function', env.ns, 'hello')) as SlessFunction;
      expect(fn.metadata.annotations?.['sless.dev/commit']).toBe(c2);
      expect(fn.metadata.annotations?.['sless.dev/build-key']).toBe(
        job1.metadata.labels?.['sless.dev/build-key'],
      );
      await env.system.stop();
      // The point of the test: kaniko is still building C1 when the controller goes.
      const during = await getObject<KubeObject>(env.http, JOB, env.controllerNs, job1.metadata.name);
      expect(during && jobSucceeded(during)).toBe(false);
      second = await startKubeSystem(env.config, { logger, kubeConfig: env.node.kubeConfig, pollMs: 500 });

      const status = await eventually(
        'Ready at C2',
        async () => {
          const s = (await second?.store.get('Function', env.ns, 'hello'))?.status as
            | FunctionStatus
            | undefined;
          return s?.phase === 'Ready' && s.commit === c2 ? s : undefined;
        },
        BUILD_MS,
      );
      const digest = await registryDigest(env.node, `${env.ns}-hello`, c1);
      const image = `${env.node.registryHost}/${env.ns}-hello:${c1}@${digest}`;
      expect(status.image).toBe(image);
      expect(status.servingCommit).toBe(c1);
      const container = specOf<{
        template: { spec: { containers: { image: string; env?: { name: string; value?: string }[] }[] } };
      }>(await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'hello')).template.spec.containers[0];
      expect(container?.image).toBe(image);
      expect(container?.env).toContainEqual({ name: 'N', value: '2' });
      // Through /fn/ of the new controller (a moment after Ready, kube-proxy may still be catching up).
      await eventually(
        '/fn/hello serves v1',
        async () => {
          const res = await fetch(`${second?.url}/fn/${env.ns}/hello`, {
            signal: AbortSignal.timeout(15_000),
          });
          return res.status === 200 && (await res.text()).includes('hello v1');
        },
        60_000,
      );
      // Nothing else was built: one Job, the one started at C1, and no image tagged C2.
      expect((await jobs()).map((j) => j.metadata.uid)).toEqual([job1.metadata.uid]);
      await expect(registryDigest(env.node, `${env.ns}-hello`, c2)).rejects.toThrow(/registry has no/);
    },
    BUILD_MS * 2,
  );
});
